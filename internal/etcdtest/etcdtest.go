// Package etcdtest starts real etcd clusters on loopback for tests: the
// etcd binary the end-to-end tests build (hack/kube-binaries.sh), several
// members on free ports, each in its own temporary directory. A test can
// kill a member (SIGKILL), start it again on its data, and find the
// leader, to inject the faults of the fault tests (test/ha). A Link puts
// a TCP proxy in front of every member for one client, and cutting it
// partitions that client from the cluster (proxy.go).
package etcdtest

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/setpointhq/setpoint/internal/kubetest"
)

// Cluster is a running etcd cluster on loopback. Its methods are safe for
// concurrent use.
type Cluster struct {
	// Endpoints are the members' client URLs, in member order.
	Endpoints []string
	bin       string
	args      [][]string // each member's arguments, to start it again

	mu      sync.Mutex
	members []*exec.Cmd
	logs    []string
}

// Start starts an n-member etcd cluster and waits until every member is
// healthy; the cluster is killed and its directories removed at cleanup.
// The data is thrown away with the test, so members skip fsync.
func Start(t testing.TB, n int) *Cluster {
	t.Helper()
	return StartWith(t, Options{Members: n})
}

// Options configure StartWith.
type Options struct {
	// Members is the number of members.
	Members int
	// SyncedDirs places member i's data directory at SyncedDirs[i], a
	// directory the caller owns (on a test's filesystem, say one whose
	// fsync is slow), and runs that member with fsync on; the others skip
	// fsync. The caller's cleanup of that filesystem must be registered
	// before StartWith, so that it runs after the members are killed.
	SyncedDirs map[int]string
}

// StartWith is Start as o says.
func StartWith(t testing.TB, o Options) *Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	bin, err := kubetest.EtcdBinary(ctx)
	if err != nil {
		t.Fatalf("etcdtest: %v", err)
	}
	for attempt := 0; ; attempt++ {
		c, err := start(ctx, t, bin, o)
		if err == nil {
			return c
		}
		if attempt == 2 {
			t.Fatalf("etcdtest: %v", err)
		}
		t.Logf("etcdtest: retrying: %v", err)
	}
}

func start(ctx context.Context, t testing.TB, bin string, o Options) (*Cluster, error) {
	c, err := Launch(ctx, LaunchOptions{Binary: bin, Dir: t.TempDir(), Members: o.Members, NoFsync: true, SyncedDirs: o.SyncedDirs})
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() {
		c.Stop()
		if t.Failed() {
			for _, l := range c.logs {
				b, _ := os.ReadFile(l)
				t.Logf("%s:\n%s", l, tail(string(b), 20))
			}
		}
	})
	return c, nil
}

// startMember starts the etcd binary with args, its output appended to
// logPath.
func startMember(bin string, args []string, logPath string) (*exec.Cmd, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return cmd, nil
}

// Kill sends SIGKILL to member i and waits for it to exit; a member that
// is not running is left alone.
func (c *Cluster) Kill(i int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p := c.members[i].Process; p != nil && c.members[i].ProcessState == nil {
		_ = p.Kill()
		_ = p.Signal(syscall.SIGCONT) // a paused member dies only once continued
		_ = c.members[i].Wait()
	}
}

// Pause stops member i with SIGSTOP, as a paused VM, a process stuck on
// its disk or a half-open network stop it: its connections stay open and
// nothing answers. Resume continues it. Kill and Stop work on a paused
// member.
// Pause returns once every thread of the member is stopped: SIGSTOP is
// delivered asynchronously, and a thread still running could answer a
// request sent just after the signal.
func (c *Cluster) Pause(i int) error {
	if err := c.signal(i, syscall.SIGSTOP); err != nil {
		return err
	}
	c.mu.Lock()
	pid := c.members[i].Process.Pid
	c.mu.Unlock()
	deadline := time.Now().Add(10 * time.Second)
	for !stopped(pid) {
		if time.Now().After(deadline) {
			return fmt.Errorf("etcdtest: m%d (pid %d) did not stop within 10s of SIGSTOP", i, pid)
		}
		time.Sleep(time.Millisecond)
	}
	return nil
}

// stopped reports whether every thread of process pid is stopped (state T
// in /proc/<pid>/task/<tid>/stat).
func stopped(pid int) bool {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil || len(tasks) == 0 {
		return false
	}
	for _, t := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", pid, t.Name()))
		if err != nil {
			return false
		}
		// The state follows the command name, which is in parentheses and
		// may itself hold spaces or parentheses.
		j := bytes.LastIndexByte(b, ')')
		if j < 0 || j+2 >= len(b) || (b[j+2] != 'T' && b[j+2] != 't') {
			return false
		}
	}
	return true
}

// Resume continues member i after Pause (SIGCONT).
func (c *Cluster) Resume(i int) error {
	return c.signal(i, syscall.SIGCONT)
}

func (c *Cluster) signal(i int, sig syscall.Signal) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.members[i]
	if m.Process == nil || m.ProcessState != nil {
		return fmt.Errorf("etcdtest: member m%d is not running", i)
	}
	if err := m.Process.Signal(sig); err != nil {
		return fmt.Errorf("etcdtest: %v to m%d: %w", sig, i, err)
	}
	return nil
}

// Running reports whether member i runs (was not killed since it was last
// started).
func (c *Cluster) Running(i int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.members[i].ProcessState == nil
}

// Restart starts member i again, on its data directory and ports, after a
// Kill, and waits until it reports healthy (it has a leader and its store
// answers). It is an error to restart a running member.
func (c *Cluster) Restart(ctx context.Context, i int) error {
	c.mu.Lock()
	if c.members[i].ProcessState == nil {
		c.mu.Unlock()
		return fmt.Errorf("etcdtest: member m%d is running", i)
	}
	cmd, err := startMember(c.bin, c.args[i], c.logs[i])
	if err != nil {
		c.mu.Unlock()
		return fmt.Errorf("etcdtest: restart m%d: %w", i, err)
	}
	c.members[i] = cmd
	c.mu.Unlock()
	return waitHealthy(ctx, c.Endpoints[i])
}

// Leader returns the index of the member that is the cluster's leader, as
// the running members report it; an error when none reports one (an
// election is under way, or a quorum is down).
func (c *Cluster) Leader(ctx context.Context) (int, error) {
	var errs []string
	for i, ep := range c.Endpoints {
		if !c.Running(i) {
			continue
		}
		id, leader, err := memberStatus(ctx, ep)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		if leader == 0 {
			continue
		}
		if leader == id {
			return i, nil
		}
	}
	return -1, fmt.Errorf("etcdtest: no member reports being the leader %v", errs)
}

// WaitInSync waits until every running member has applied the raft log
// up to the index the most advanced member reported when it was called:
// a member paused or cut off has caught up, and losing another member
// no longer costs the quorum.
func (c *Cluster) WaitInSync(ctx context.Context) error {
	var target uint64
	for i, ep := range c.Endpoints {
		if !c.Running(i) {
			continue
		}
		if s, err := status(ctx, ep); err == nil {
			target = max(target, s.RaftIndex)
		}
	}
	for i, ep := range c.Endpoints {
		for c.Running(i) {
			s, err := status(ctx, ep)
			if err == nil && s.RaftAppliedIndex >= target {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("etcdtest: m%d did not catch up with raft index %d: %w", i, target, ctx.Err())
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	return nil
}

// status asks the member at endpoint for its status.
func status(ctx context.Context, endpoint string) (*clientv3.StatusResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 2 * time.Second, Logger: zap.NewNop(), Context: ctx})
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	return cli.Status(ctx, endpoint)
}

// memberStatus asks the member at endpoint for its id and its leader's.
func memberStatus(ctx context.Context, endpoint string) (id, leader uint64, err error) {
	s, err := status(ctx, endpoint)
	if err != nil {
		return 0, 0, fmt.Errorf("status of %s: %w", endpoint, err)
	}
	return s.Header.MemberId, s.Leader, nil
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

// MoveLeader makes member to the cluster's leader (etcd's leadership
// transfer), when it is not already, and returns once it leads.
func (c *Cluster) MoveLeader(ctx context.Context, to int) error {
	for {
		leader, err := c.Leader(ctx)
		if err == nil && leader == to {
			return nil
		}
		if err == nil {
			err = c.moveLeader(ctx, leader, to)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("etcdtest: m%d did not become the leader: %w (last: %v)", to, ctx.Err(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// moveLeader asks the leader, member from, to hand its leadership to to.
func (c *Cluster) moveLeader(ctx context.Context, from, to int) error {
	target, err := status(ctx, c.Endpoints[to])
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{c.Endpoints[from]}, DialTimeout: 2 * time.Second, Logger: zap.NewNop(), Context: ctx})
	if err != nil {
		return err
	}
	defer cli.Close()
	_, err = cli.MoveLeader(ctx, target.Header.MemberId)
	return err
}
