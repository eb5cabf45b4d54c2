package atomiclimit_test

import (
	"os/exec"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

// TestFastPathInlines proves the GCRA fast path costs the generic contract
// nothing: the compiler inlines the bucket's first attempt (one load, the
// decision, one CompareAndSwap) into Keyed.Allow's lookup path and into
// Limiter.Allow, and the decision gcra.Params.Admit into that attempt, as
// xxhash's TestInlining checks its own hot functions. It reads the
// compiler's decisions (-gcflags=-m) on a program that instantiates both.
func TestFastPathInlines(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a program with the go command")
	}
	out, err := exec.Command(goTool(), "build", "-gcflags=-m", "-gcflags=github.com/atomiclimit/atomiclimit=-m", "-o", devNull(), "./testdata/inline").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, want := range []string{
		`keyed\.go:\d+:\d+: inlining call to algo\.\(\*Bucket\)\.TryAllowN`,
		`limiter\.go:\d+:\d+: inlining call to algo\.\(\*Bucket\)\.TryAllowN`,
		`keyed\.go:\d+:\d+: inlining call to gcra\.\(\*Params\)\.Admit`,
	} {
		if !regexp.MustCompile(want).Match(out) {
			t.Errorf("the compiler no longer inlines %s", want)
		}
	}
}

// TestReportInlines proves that a door without a hook pays for the hook
// events of a request one comparison: the compiler inlines Stack.Report
// (its loop is out of line) into the door's code.
func TestReportInlines(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a program with the go command")
	}
	out, err := exec.Command(goTool(), "build", "-gcflags=-m", "-o", devNull(), "./testdata/inline").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	want := `main\.go:\d+:\d+: inlining call to atomiclimit\.\(\*Stack\[go\.shape\.string\]\)\.Report`
	if !regexp.MustCompile(want).Match(out) {
		t.Errorf("the compiler no longer inlines %s:\n%s", want, out)
	}
}

// goTool is the go command that runs the tests: the one in the GOROOT the
// toolchain reports, or the one on PATH.
func goTool() string {
	if out, err := exec.Command("go", "env", "GOROOT").Output(); err == nil {
		return strings.TrimSpace(string(out)) + "/bin/go"
	}
	return "go"
}

func devNull() string {
	if runtime.GOOS == "windows" {
		return "NUL"
	}
	return "/dev/null"
}
