package kubetest

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// ControllerManagerOptions configures StartControllerManager.
type ControllerManagerOptions struct {
	// Controllers is the --controllers list, for example
	// []string{"horizontalpodautoscaling"}. Empty means only the HPA
	// controller: the harness exists to run it next to Setpoint.
	Controllers []string

	// Flags are extra kube-controller-manager flags, appended after the
	// harness's own so that they win (for example
	// "--horizontal-pod-autoscaler-sync-period=1s").
	Flags []string
}

// ControllerManager is a kube-controller-manager the harness started
// against a Cluster. The Cluster's Stop kills it too.
type ControllerManager struct {
	p *process
}

// Log returns the last n lines of the controller manager's log.
func (m *ControllerManager) Log(n int) string { return m.p.logTail(n) }

// Stop kills the controller manager. It is safe to call more than once.
func (m *ControllerManager) Stop() error { return m.p.kill(30 * time.Second) }

// StartControllerManager runs kube-controller-manager (built with
// kube-apiserver, from the same pinned Kubernetes module) against the
// cluster as the admin identity, without leader election, and waits until
// its /healthz answers. Its output is in kube-controller-manager-<n>.log
// under Dir.
//
// The binary must be in the cluster's binary directory; a directory built
// before the harness learned about it fails here with a clear error, and the
// apiserver-only tests keep working.
func (c *Cluster) StartControllerManager(ctx context.Context, opts ControllerManagerOptions) (*ControllerManager, error) {
	path := filepath.Join(c.binDir, "kube-controller-manager")
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("kubetest: binary kube-controller-manager not found in %s (rebuild with make kube-binaries): %w", c.binDir, err)
	}
	c.mu.Lock()
	n := len(c.controllerManagers)
	c.mu.Unlock()
	kubeconfig := filepath.Join(c.dir, fmt.Sprintf("kube-controller-manager-%d.kubeconfig", n))
	if err := c.WriteKubeconfig(kubeconfig); err != nil {
		return nil, err
	}
	controllers := opts.Controllers
	if len(controllers) == 0 {
		controllers = []string{"horizontalpodautoscaling"}
	}
	list := ""
	for i, name := range controllers {
		if i > 0 {
			list += ","
		}
		list += name
	}
	for attempt := 0; ; attempt++ {
		ports, err := freePorts(1)
		if err != nil {
			return nil, err
		}
		args := append([]string{
			"--kubeconfig=" + kubeconfig,
			"--authentication-kubeconfig=" + kubeconfig,
			"--authorization-kubeconfig=" + kubeconfig,
			"--controllers=" + list,
			"--leader-elect=false",
			"--bind-address=127.0.0.1",
			"--secure-port=" + strconv.Itoa(ports[0]),
			"--cert-dir=" + filepath.Join(c.dir, fmt.Sprintf("kube-controller-manager-%d-certs", n)),
			"--profiling=false",
		}, opts.Flags...)
		p, err := startProcess("kube-controller-manager", path, args, filepath.Join(c.dir, fmt.Sprintf("kube-controller-manager-%d.log", n)))
		if err != nil {
			return nil, err
		}
		c.mu.Lock()
		c.controllerManagers = append(c.controllerManagers, p)
		c.mu.Unlock()
		healthz := "https://127.0.0.1:" + strconv.Itoa(ports[0]) + "/healthz"
		// The serving certificate is self-signed in cert-dir; only
		// liveness is checked here, not identity.
		client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // loopback health probe of a process the harness just started
		readyCtx, cancel := context.WithTimeout(ctx, DefaultReadyTimeout)
		err = waitReady(readyCtx, p, func(ctx context.Context) bool { return httpOK(ctx, client, healthz) })
		cancel()
		client.CloseIdleConnections()
		if err == nil {
			return &ControllerManager{p: p}, nil
		}
		_ = p.kill(30 * time.Second)
		if attempt < 2 && p.logContains("address already in use") {
			continue
		}
		return nil, err
	}
}
