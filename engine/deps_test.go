package engine_test

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/setpointhq/setpoint"

// TestStandardLibraryOnly keeps the engine on the standard library: every
// package it depends on (tests excluded) must be in the standard library,
// i.e. have no dot in its first path element and not be in this module,
// except the engine itself.
func TestStandardLibraryOnly(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go command not found")
	}
	cmd := exec.Command(goBin, "list", "-deps", "./engine")
	cmd.Dir = ".." // the module root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps ./engine: %v\n%s", err, stderr.String())
	}
	deps := strings.Fields(string(out))
	if len(deps) == 0 {
		t.Fatal("go list -deps ./engine listed nothing")
	}
	sawEngine := false
	for _, p := range deps {
		if p == module+"/engine" {
			sawEngine = true
			continue
		}
		first, _, _ := strings.Cut(p, "/")
		if strings.Contains(first, ".") || p == module || strings.HasPrefix(p, module+"/") {
			t.Errorf("engine depends on %s, which is not in the standard library", p)
		}
	}
	if !sawEngine {
		t.Errorf("go list -deps ./engine did not list the engine itself: %v", deps)
	}
}
