package atomiclimit_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestREADMEQuickStart holds the README's quick start to what compiles and
// runs: its first Go block is testdata/quickstart/main.go to the byte, and
// the block after it is what that program prints.
func TestREADMEQuickStart(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	program, err := os.ReadFile("testdata/quickstart/main.go")
	if err != nil {
		t.Fatal(err)
	}
	text := string(readme)
	start := strings.Index(text, "```go\n")
	if start < 0 {
		t.Fatal("README.md has no Go block")
	}
	block := text[start+len("```go\n"):]
	end := strings.Index(block, "```\n")
	if end < 0 {
		t.Fatal("README.md's Go block does not end")
	}
	if got := block[:end]; got != string(program) {
		t.Fatalf("README.md's quick start is not testdata/quickstart/main.go:\n%s", got)
	}
	rest := block[end+len("```\n"):]
	start = strings.Index(rest, "```text\n")
	if start < 0 {
		t.Fatal("README.md does not show what the quick start prints")
	}
	want := rest[start+len("```text\n"):]
	want = want[:strings.Index(want, "```\n")]
	if testing.Short() {
		t.Skip("runs the go command")
	}
	out, err := exec.Command(goTool(), "run", "./testdata/quickstart").CombinedOutput()
	if err != nil {
		t.Fatalf("go run ./testdata/quickstart: %v\n%s", err, out)
	}
	if string(out) != want {
		t.Fatalf("the quick start printed %q; README.md says %q", out, want)
	}
}
