package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestExitCodes: the command succeeds on the public corpus and fails when
// nothing is found or a file cannot be parsed.
func TestExitCodes(t *testing.T) {
	broken := t.TempDir()
	if err := os.WriteFile(filepath.Join(broken, "x.json"), []byte("not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		path string
		want int
	}{
		{"public corpus", "../../testdata/conformance/scenarios/tolerance.json", 0},
		{"nothing found", t.TempDir(), 1},
		{"unparsable file", broken, 1},
		{"missing path", filepath.Join(t.TempDir(), "nope"), 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := run([]string{tc.path}); got != tc.want {
				t.Errorf("exit code %d, want %d", got, tc.want)
			}
		})
	}
}
