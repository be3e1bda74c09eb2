package kubetest

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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

// ControllerManager is a kube-controller-manager, kube-scheduler or kwok
// process the harness started against a Cluster. The Cluster's Stop kills
// it too.
type ControllerManager struct {
	p *process
}

// Log returns the last n lines of the process's log.
func (m *ControllerManager) Log(n int) string { return m.p.logTail(n) }

// Pid returns the process id, for measuring what the process costs.
func (m *ControllerManager) Pid() int { return m.p.cmd.Process.Pid }

// Stop kills the process. It is safe to call more than once.
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
	controllers := opts.Controllers
	if len(controllers) == 0 {
		controllers = []string{"horizontalpodautoscaling"}
	}
	return c.startComponent(ctx, "kube-controller-manager", func(kubeconfig, certDir string) []string {
		return append([]string{
			"--kubeconfig=" + kubeconfig,
			"--authentication-kubeconfig=" + kubeconfig,
			"--authorization-kubeconfig=" + kubeconfig,
			"--controllers=" + strings.Join(controllers, ","),
			"--leader-elect=false",
			"--cert-dir=" + certDir,
			"--profiling=false",
		}, opts.Flags...)
	})
}

// StartScheduler runs kube-scheduler (built from the same pinned Kubernetes
// module) against the cluster as the admin identity, without leader
// election, with its default profile and any extra flags, and waits until
// its /healthz answers. Its output is in kube-scheduler-<n>.log under Dir.
func (c *Cluster) StartScheduler(ctx context.Context, flags ...string) (*ControllerManager, error) {
	return c.startComponent(ctx, "kube-scheduler", func(kubeconfig, certDir string) []string {
		return append([]string{
			"--kubeconfig=" + kubeconfig,
			"--authentication-kubeconfig=" + kubeconfig,
			"--authorization-kubeconfig=" + kubeconfig,
			"--leader-elect=false",
			"--cert-dir=" + certDir,
			"--profiling=false",
		}, flags...)
	})
}

// startComponent starts a control-plane component that serves /healthz on
// --secure-port: args builds its flags from the admin kubeconfig and a
// certificate directory of its own; the harness adds the bind address and
// a free port, retried when another process took it first.
func (c *Cluster) startComponent(ctx context.Context, name string, args func(kubeconfig, certDir string) []string) (*ControllerManager, error) {
	path := filepath.Join(c.binDir, name)
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("kubetest: binary %s not found in %s (rebuild with make kube-binaries): %w", name, c.binDir, err)
	}
	c.mu.Lock()
	n := len(c.controllerManagers)
	c.mu.Unlock()
	base := filepath.Join(c.dir, fmt.Sprintf("%s-%d", name, n))
	kubeconfig := base + ".kubeconfig"
	if err := c.WriteKubeconfig(kubeconfig); err != nil {
		return nil, err
	}
	for attempt := 0; ; attempt++ {
		ports, err := freePorts(1)
		if err != nil {
			return nil, err
		}
		all := append([]string{"--bind-address=127.0.0.1", "--secure-port=" + strconv.Itoa(ports[0])}, args(kubeconfig, base+"-certs")...)
		p, err := startProcess(name, path, all, base+".log")
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
