package fleet_test

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"
)

// TestImports keeps the fleet package next to the target package: it may
// depend on the standard library, the engine and the target package only
// (tests excluded), never on the wire format, the store or the agent.
func TestImports(t *testing.T) {
	const module = "github.com/setpointhq/setpoint"
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go command not found")
	}
	cmd := exec.Command(goBin, "list", "-deps", "./fleet")
	cmd.Dir = ".."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps ./fleet: %v\n%s", err, stderr.String())
	}
	allowed := map[string]bool{module + "/fleet": true, module + "/engine": true, module + "/target": true}
	seen := 0
	for _, p := range strings.Fields(string(out)) {
		first, _, _ := strings.Cut(p, "/")
		if allowed[p] {
			seen++
			continue
		}
		if strings.Contains(first, ".") {
			t.Errorf("fleet depends on %s", p)
		}
	}
	if seen != len(allowed) {
		t.Errorf("go list -deps ./fleet listed %d of fleet, engine, target: %s", seen, out)
	}
}
