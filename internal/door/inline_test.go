package door

import (
	"os/exec"
	"regexp"
	"runtime"
	"testing"
)

// TestReportInlines proves that a door without a hook pays for the hook
// events one comparison: the compiler inlines Report (its loop is out of
// line).
func TestReportInlines(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a program with the go command")
	}
	out, err := exec.Command("go", "build", "-gcflags=-m", "-o", devNull(), "./testdata/inline").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, want := range []string{
		`main\.go:\d+:\d+: inlining call to door\.\(\*Stack\[go\.shape\.string\]\)\.Report`,
	} {
		if !regexp.MustCompile(want).Match(out) {
			t.Errorf("the compiler no longer inlines %s:\n%s", want, out)
		}
	}
}

func devNull() string {
	if runtime.GOOS == "windows" {
		return "NUL"
	}
	return "/dev/null"
}
