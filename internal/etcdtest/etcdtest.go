// Package etcdtest starts real etcd clusters on loopback for tests: the
// etcd binary the end-to-end tests build (hack/kube-binaries.sh), several
// members on free ports, each in its own temporary directory.
package etcdtest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/setpointhq/setpoint/internal/kubetest"
)

// Cluster is a running etcd cluster on loopback.
type Cluster struct {
	// Endpoints are the members' client URLs, in member order.
	Endpoints []string
	members   []*exec.Cmd
	logs      []string
}

// Start starts an n-member etcd cluster and waits until every member is
// healthy; the cluster is killed and its directories removed at cleanup.
// The data is thrown away with the test, so members skip fsync.
func Start(t testing.TB, n int) *Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	bin, err := kubetest.EtcdBinary(ctx)
	if err != nil {
		t.Fatalf("etcdtest: %v", err)
	}
	for attempt := 0; ; attempt++ {
		c, err := start(ctx, t, bin, n)
		if err == nil {
			return c
		}
		if attempt == 2 {
			t.Fatalf("etcdtest: %v", err)
		}
		t.Logf("etcdtest: retrying: %v", err)
	}
}

func start(ctx context.Context, t testing.TB, bin string, n int) (*Cluster, error) {
	ports, err := freePorts(2 * n)
	if err != nil {
		return nil, err
	}
	dir := t.TempDir()
	c := &Cluster{}
	var initial []string
	for i := range n {
		initial = append(initial, fmt.Sprintf("m%d=http://127.0.0.1:%d", i, ports[2*i+1]))
	}
	for i := range n {
		client := "http://127.0.0.1:" + strconv.Itoa(ports[2*i])
		peer := "http://127.0.0.1:" + strconv.Itoa(ports[2*i+1])
		logPath := filepath.Join(dir, fmt.Sprintf("m%d.log", i))
		logf, err := os.Create(logPath)
		if err != nil {
			return nil, err
		}
		cmd := exec.Command(bin,
			"--name="+fmt.Sprintf("m%d", i),
			"--data-dir="+filepath.Join(dir, fmt.Sprintf("m%d", i)),
			"--listen-client-urls="+client, "--advertise-client-urls="+client,
			"--listen-peer-urls="+peer, "--initial-advertise-peer-urls="+peer,
			"--initial-cluster="+strings.Join(initial, ","),
			"--initial-cluster-state=new", "--initial-cluster-token=etcdtest",
			"--unsafe-no-fsync", "--log-level=warn",
		)
		cmd.Stdout, cmd.Stderr = logf, logf
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			logf.Close()
			return nil, err
		}
		logf.Close()
		c.members = append(c.members, cmd)
		c.Endpoints = append(c.Endpoints, client)
		c.logs = append(c.logs, logPath)
	}
	t.Cleanup(func() {
		for i := range c.members {
			c.Kill(i)
		}
		if t.Failed() {
			for _, l := range c.logs {
				b, _ := os.ReadFile(l)
				t.Logf("%s:\n%s", l, tail(string(b), 20))
			}
		}
	})
	for _, ep := range c.Endpoints {
		if err := waitHealthy(ctx, ep); err != nil {
			for i := range c.members {
				c.Kill(i)
			}
			return nil, err
		}
	}
	return c, nil
}

// Kill sends SIGKILL to member i and waits for it to exit.
func (c *Cluster) Kill(i int) {
	if p := c.members[i].Process; p != nil && c.members[i].ProcessState == nil {
		_ = p.Kill()
		_ = c.members[i].Wait()
	}
}

func waitHealthy(ctx context.Context, endpoint string) error {
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, endpoint+"/health", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("etcd at %s not healthy: %w", endpoint, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func freePorts(n int) ([]int, error) {
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
