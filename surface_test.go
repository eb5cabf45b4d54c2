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
// but internal/, cmd/, the nested modules and examples.
var publicPackages = []string{".", "gcra", "atomicbucket", "shardmap", "httplimit"}

// maxSurface is the budget for exported identifiers across publicPackages.
const maxSurface = 209

// TestPublicSurface holds the exported API to its budget, counted as types,
// functions, methods on exported types, interface methods, constants and
// variables declared in the public packages (struct fields are not counted;
// an alias counts once, its type's methods where they are declared, under
// internal/). Run with -v for the list.
func TestPublicSurface(t *testing.T) {
	total := 0
	for _, dir := range publicPackages {
		names := exported(t, dir)
		total += len(names)
		t.Logf("%-13s %3d  %s", dir, len(names), strings.Join(names, " "))
	}
	t.Logf("total %d (budget %d)", total, maxSurface)
	if total > maxSurface {
		t.Errorf("%d exported identifiers in the public packages, over the budget of %d", total, maxSurface)
	}
}

func exported(t *testing.T, dir string) []string {
	t.Helper()
	fset := token.NewFileSet()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, n), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
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
	return names
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
