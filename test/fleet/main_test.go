package fleet

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/setpointhq/setpoint/internal/kubetest"
)

// bins are the Setpoint binaries TestMain built.
var bins struct{ server, agent string }

// long is set by SETPOINT_FLEET_LONG: the controller's default windows
// and longer traces (make fleet-long).
var long = os.Getenv("SETPOINT_FLEET_LONG") != ""

func TestMain(m *testing.M) {
	if os.Getenv("SETPOINT_FLEET_SKIP") != "" {
		fmt.Println("fleet: skipped (SETPOINT_FLEET_SKIP is set)")
		os.Exit(0)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	built := kubetest.BinariesBuilt(ctx)
	cancel()
	if !built && os.Getenv("CI") != "true" {
		fmt.Println("fleet: skipped: the kube binaries, kube-scheduler and kwok are not built (make kube-binaries builds them once, into ~/.cache/setpoint)")
		os.Exit(0)
	}
	dir, err := os.MkdirTemp("", "setpoint-fleet-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, "fleet:", err)
		os.Exit(1)
	}
	code := 1
	if err := build(dir); err != nil {
		fmt.Fprintln(os.Stderr, "fleet:", err)
	} else {
		code = m.Run()
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// build compiles setpoint-server and setpoint-agent into dir.
func build(dir string) error {
	bins.server = filepath.Join(dir, "setpoint-server")
	bins.agent = filepath.Join(dir, "setpoint-agent")
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	cmd := exec.Command(goTool, "build", "-o", dir+"/",
		"github.com/setpointhq/setpoint/cmd/setpoint-server", "github.com/setpointhq/setpoint/cmd/setpoint-agent")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("build setpoint-server and setpoint-agent: %w", err)
	}
	return nil
}
