package kubetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// EnvBinDir names the environment variable that points the harness at a
// directory holding prebuilt kube-apiserver and etcd binaries. When it is
// unset the harness runs hack/kube-binaries.sh, which builds them once into a
// cache directory.
const EnvBinDir = "SETPOINT_KUBE_BIN_DIR"

// binariesScript is the build script, relative to the repository root.
const binariesScript = "hack/kube-binaries.sh"

// binDir returns the directory with kube-apiserver and etcd: explicit wins,
// then $SETPOINT_KUBE_BIN_DIR, then the output of hack/kube-binaries.sh.
func binDir(ctx context.Context, explicit string) (string, error) {
	dir := explicit
	if dir == "" {
		dir = os.Getenv(EnvBinDir)
	}
	if dir == "" {
		var err error
		if dir, err = buildBinaries(ctx); err != nil {
			return "", err
		}
	}
	for _, name := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			return "", fmt.Errorf("kubetest: binary %s not found in %s: %w", name, dir, err)
		}
	}
	return dir, nil
}

// buildBinaries runs hack/kube-binaries.sh, found by walking up from the
// working directory (go test runs in the package directory), and returns the
// directory it prints. A cached build returns at once; a first build takes
// minutes.
func buildBinaries(ctx context.Context) (string, error) {
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, filepath.Join(root, binariesScript))
	cmd.Dir = root
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("kubetest: %s: %w\n%s", binariesScript, err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	return lines[len(lines)-1], nil
}

// repoRoot returns the nearest ancestor of the working directory that
// contains the build script.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("kubetest: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, binariesScript)); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("kubetest: " + binariesScript + " not found above the working directory; set " + EnvBinDir)
		}
		dir = parent
	}
}

// EtcdBinary returns the path of the etcd binary the harness runs
// ($SETPOINT_KUBE_BIN_DIR, else hack/kube-binaries.sh's build).
func EtcdBinary(ctx context.Context) (string, error) {
	dir, err := binDir(ctx, "")
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "etcd"), nil
}

// BinariesBuilt reports whether every binary the harness can run
// (kube-apiserver, kube-controller-manager, kube-scheduler, etcd, kwok) is
// built, without building any: $SETPOINT_KUBE_BIN_DIR is set, or
// hack/kube-binaries.sh --check finds its cached build complete. Tests
// that would otherwise spend minutes building skip outside CI when it is
// false.
func BinariesBuilt(ctx context.Context) bool {
	if os.Getenv(EnvBinDir) != "" {
		return true
	}
	root, err := repoRoot()
	if err != nil {
		return false
	}
	cmd := exec.CommandContext(ctx, filepath.Join(root, binariesScript), "--check")
	cmd.Dir = root
	return cmd.Run() == nil
}
