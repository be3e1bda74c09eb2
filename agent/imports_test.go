package agent

import (
	"os/exec"
	"strings"
	"testing"
)

// allowedInternal are the internal packages the agent may depend on: leaf
// helpers of this module's client (clients/go, through which the agent
// dials), which import nothing of the engine, the store or the server.
var allowedInternal = map[string]bool{
	"github.com/setpointhq/setpoint/internal/netaddr": true,
}

// The agent never decides: neither it nor its command may depend on the
// engine, the store or the server, only on the generated API and the Go
// client.
func TestAgentNeverDecides(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	out, err := exec.Command("go", "list", "-deps",
		"github.com/setpointhq/setpoint/agent/...", "github.com/setpointhq/setpoint/cmd/setpoint-agent").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		for _, forbidden := range []string{"engine", "store", "server", "internal"} {
			p := "github.com/setpointhq/setpoint/" + forbidden
			if (pkg == p || strings.HasPrefix(pkg, p+"/")) && !allowedInternal[pkg] {
				t.Errorf("the agent depends on %s", pkg)
			}
		}
	}
}
