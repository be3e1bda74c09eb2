package setpointclient_test

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestREADME: the README's Go integration shows only lines of
// ExampleClient_Changes, which runs against a real server, and stays under
// 20 lines.
func TestREADME(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)```go\n(.*?)```").FindSubmatch(readme)
	if m == nil {
		t.Fatal("the README has no go block")
	}
	example, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	lines := map[string]bool{}
	for _, l := range strings.Split(string(example), "\n") {
		lines[strings.TrimSpace(l)] = true
	}
	block := strings.Split(strings.TrimRight(string(m[1]), "\n"), "\n")
	if len(block) >= 20 {
		t.Errorf("the README's Go integration has %d lines, want fewer than 20", len(block))
	}
	for _, l := range block {
		l = strings.TrimSpace(l)
		if l != "" && !lines[l] && !lines[strings.TrimPrefix(l, "import ")] {
			t.Errorf("README line not in example_test.go: %s", l)
		}
	}
}
