package kubetest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// KwokOptions configures StartKwok.
type KwokOptions struct {
	// Config is the kwok configuration file: the Stages that move nodes
	// and pods through their lives (twin.Stages writes one).
	Config string

	// NodeSelector is a label selector: kwok manages the nodes that match
	// it and the pods bound to them, and nothing else.
	NodeSelector string

	// PodCIDR is the range kwok gives pods their IPs from, and NodeIP the
	// address every managed node reports. Choose addresses nothing
	// connects to (the documentation ranges of RFC 5737): no part of the
	// harness sends traffic to them.
	PodCIDR, NodeIP string
}

// StartKwok runs kwok (sigs.k8s.io/kwok, built into the binary directory
// by hack/kube-binaries.sh) against the cluster as the admin identity. It
// serves nothing: no kubelet API, so nothing can proxy to a simulated
// node. Its output is in kwok-<n>.log under Dir. It returns once the
// process runs; the caller knows it works when a managed node turns Ready.
func (c *Cluster) StartKwok(ctx context.Context, opts KwokOptions) (*ControllerManager, error) {
	path := filepath.Join(c.binDir, "kwok")
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("kubetest: binary kwok not found in %s (rebuild with make kube-binaries): %w", c.binDir, err)
	}
	if opts.Config == "" || opts.NodeSelector == "" || opts.PodCIDR == "" || opts.NodeIP == "" {
		return nil, fmt.Errorf("kubetest: StartKwok needs Config, NodeSelector, PodCIDR and NodeIP")
	}
	c.mu.Lock()
	n := len(c.controllerManagers)
	c.mu.Unlock()
	base := filepath.Join(c.dir, fmt.Sprintf("kwok-%d", n))
	kubeconfig := base + ".kubeconfig"
	if err := c.WriteKubeconfig(kubeconfig); err != nil {
		return nil, err
	}
	// kwok reads ~/.kwok/kwok.yaml too when it exists; a work directory of
	// its own keeps a developer's configuration out of the test.
	workDir := base + "-work"
	if err := os.MkdirAll(workDir, 0o700); err != nil {
		return nil, fmt.Errorf("kubetest: %w", err)
	}
	p, err := startProcess("kwok", path, []string{
		"--kubeconfig=" + kubeconfig,
		"--config=" + opts.Config,
		"--manage-all-nodes=false",
		"--manage-nodes-with-label-selector=" + opts.NodeSelector,
		"--cidr=" + opts.PodCIDR,
		"--node-ip=" + opts.NodeIP,
	}, base+".log", "KWOK_WORKDIR="+workDir)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.controllerManagers = append(c.controllerManagers, p)
	c.mu.Unlock()
	// An early exit (a bad configuration) shows within a moment.
	select {
	case <-p.done:
		return nil, p.exitError()
	case <-time.After(300 * time.Millisecond):
	case <-ctx.Done():
		_ = p.kill(30 * time.Second)
		return nil, ctx.Err()
	}
	return &ControllerManager{p: p}, nil
}
