package atomiclimit_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// publicPackages are the root module's packages a user imports: everything
// but internal/, cmd/, testdata/, the nested modules and examples.
var publicPackages = []string{".", "gcra", "window", "atomicbucket", "shardmap", "httplimit"}

// maxSurface is the budget for exported identifiers across every public
// package of the three modules: publicPackages and the nested modules'.
const maxSurface = 383 // 377, and the client door of issue 30: Stack.Wait, httplimit's Transport, TransportConfig, NewTransport, Transport.RoundTrip, redislimit's Limiter.Hold

// TestPublicSurface holds the exported API to its budget, counted as types,
// functions, methods on exported types, interface methods, constants and
// variables declared in the public packages (struct fields are not
// counted), in the root module's public packages and the nested modules'.
// No public package may declare an exported alias of an internal type: go
// doc shows such a type without its methods. (No module reaches into
// another's internal/: .ci/run's seams step checks it with go list.) Run
// with -v for the lists.
func TestPublicSurface(t *testing.T) {
	total := 0
	for _, dir := range append(publicPackages, nestedPackages(t)...) {
		names, aliases := exported(t, dir)
		total += len(names)
		t.Logf("%-13s %3d  %s", dir, len(names), strings.Join(names, " "))
		for _, a := range aliases {
			t.Errorf("%s: %s is an alias of an internal type", dir, a)
		}
	}
	t.Logf("total %d (budget %d)", total, maxSurface)
	if total > maxSurface {
		t.Errorf("%d exported identifiers in the public packages, over the budget of %d", total, maxSurface)
	}
}

// nestedPackages are the public packages of the nested modules: the
// directories below one holding a go.mod (the root's aside) with Go files,
// but internal/, cmd/, examples/ and testdata/, and bench/.
func nestedPackages(t *testing.T) []string {
	var dirs []string
	var modules []string
	err := filepath.WalkDir(".", func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			if d.Name() == "go.mod" && filepath.Dir(p) != "." {
				modules = append(modules, filepath.Dir(p))
			}
			return nil
		}
		switch d.Name() {
		case "internal", "cmd", "examples", "testdata", "bench", ".git":
			return filepath.SkipDir
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range modules {
		_ = filepath.WalkDir(m, func(p string, d os.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return err
			}
			switch d.Name() {
			case "internal", "cmd", "examples", "testdata":
				return filepath.SkipDir
			}
			if p != m {
				if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
					return filepath.SkipDir // a module of its own
				}
			}
			if hasGo(p) {
				dirs = append(dirs, p)
			}
			return nil
		})
	}
	sort.Strings(dirs)
	return dirs
}

func hasGo(dir string) bool {
	es, _ := os.ReadDir(dir)
	for _, e := range es {
		if n := e.Name(); strings.HasSuffix(n, ".go") && !strings.HasSuffix(n, "_test.go") {
			return true
		}
	}
	return false
}

// exported returns the exported names declared in dir's non-test files, and
// those of them that are aliases of a type of an internal package.
func exported(t *testing.T, dir string) (names, aliases []string) {
	t.Helper()
	fset := token.NewFileSet()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, n), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		internal := map[string]bool{} // the file's imports of internal packages, by name
		for _, imp := range f.Imports {
			p := strings.Trim(imp.Path.Value, `"`)
			if strings.Contains(p, "/internal/") {
				name := p[strings.LastIndex(p, "/")+1:]
				if imp.Name != nil {
					name = imp.Name.Name
				}
				internal[name] = true
			}
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if !d.Name.IsExported() {
					continue
				}
				if d.Recv != nil {
					recv := receiverName(d.Recv.List[0].Type)
					if !ast.IsExported(recv) {
						continue
					}
					names = append(names, recv+"."+d.Name.Name)
					continue
				}
				names = append(names, d.Name.Name)
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						if !s.Name.IsExported() {
							continue
						}
						names = append(names, s.Name.Name)
						if s.Assign.IsValid() && isInternal(s.Type, internal) {
							aliases = append(aliases, s.Name.Name)
						}
						if it, ok := s.Type.(*ast.InterfaceType); ok {
							for _, m := range it.Methods.List {
								for _, mn := range m.Names {
									if mn.IsExported() {
										names = append(names, s.Name.Name+"."+mn.Name)
									}
								}
							}
						}
					case *ast.ValueSpec:
						for _, vn := range s.Names {
							if vn.IsExported() {
								names = append(names, vn.Name)
							}
						}
					}
				}
			}
		}
	}
	sort.Strings(names)
	return names, aliases
}

// isInternal reports whether the type expression e names a type of one of
// the internal packages (by import name).
func isInternal(e ast.Expr, internal map[string]bool) bool {
	switch e := e.(type) {
	case *ast.SelectorExpr:
		id, ok := e.X.(*ast.Ident)
		return ok && internal[id.Name]
	case *ast.IndexExpr:
		return isInternal(e.X, internal)
	case *ast.IndexListExpr:
		return isInternal(e.X, internal)
	}
	return false
}

func receiverName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.StarExpr:
		return receiverName(e.X)
	case *ast.IndexExpr:
		return receiverName(e.X)
	case *ast.IndexListExpr:
		return receiverName(e.X)
	case *ast.Ident:
		return e.Name
	}
	return ""
}
