package ha

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"

	setpointclient "github.com/setpointhq/setpoint/clients/go"
	"github.com/setpointhq/setpoint/internal/etcdtest"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"github.com/setpointhq/setpoint/test/internal/acked"
	"github.com/setpointhq/setpoint/test/internal/slowfs"
)

// servers is how many setpoint-server processes share the history.
const servers = 3

// cluster is a 3-member etcd cluster and three setpoint-server processes
// on it, every one on its own loopback address, with its own clock, and
// reaching etcd through its own link (a proxy in front of every member)
// that the test can cut.
type cluster struct {
	etcd  *etcdtest.Cluster
	nodes []*node
	// disk is the slow-disk member's filesystem, nil without one.
	disk     *slowfs.Disk
	slowDisk int // the member whose data is on disk, with fsync on
}

// node is one setpoint-server process.
type node struct {
	srv    acked.Server
	probe  setpointv1.AutoscalerServiceClient // what Start waits on
	link   *etcdtest.Link                     // its way to etcd
	offset time.Duration                      // its clock's offset from the test's

	mu   sync.Mutex
	proc *exec.Cmd // nil while killed
}

// skewed are the clocks of the servers when they are off by skew: one
// behind, one right, one ahead.
func skewed(skew time.Duration) []time.Duration { return []time.Duration{-skew, 0, skew} }

// startCluster starts etcd and the servers, server i's clock offset by
// offsets[i] (the binary's testclock seam, clock_testclock.go); at cleanup
// the servers get SIGTERM (their logs' tails are logged when the test
// failed) and etcd is killed.
func startCluster(t *testing.T, offsets []time.Duration) *cluster {
	t.Helper()
	return startClusterWith(t, offsets, -1)
}

// startClusterWith is startCluster with member slowDisk's data on a slowfs
// mount, the one member that runs with fsync (the others skip it; -1: no
// such member). Mounting needs /dev/fuse and root: as root a failed mount
// fails the test; otherwise the cluster has no slow disk (c.disk is nil),
// and the test says so.
func startClusterWith(t *testing.T, offsets []time.Duration, slowDisk int) *cluster {
	t.Helper()
	c := &cluster{slowDisk: -1}
	opts := etcdtest.Options{Members: 3}
	if slowDisk >= 0 {
		backing, mnt := t.TempDir(), t.TempDir()
		disk, err := slowfs.Mount(backing, mnt)
		switch {
		case err == nil:
			// Registered before etcd starts: unmounted after its members
			// are killed, and before the directories are removed.
			t.Cleanup(func() {
				if err := disk.Unmount(); err != nil {
					t.Error(err)
				}
			})
			c.disk, c.slowDisk = disk, slowDisk
			opts.SyncedDirs = map[int]string{slowDisk: filepath.Join(mnt, "data")}
		case os.Geteuid() == 0:
			t.Fatalf("mount slowfs for the slow-disk member (needs /dev/fuse): %v", err)
		default:
			t.Logf("no slow-disk member: mounting slowfs needs root and /dev/fuse (%v)", err)
		}
	}
	c.etcd = etcdtest.StartWith(t, opts)
	dir := t.TempDir()
	// Every server behind one address seals Watch resume points with the
	// same secret (as deploy-ha gives them one Secret).
	resumeKey := filepath.Join(dir, "resume.key")
	if err := os.WriteFile(resumeKey, []byte(rand.Text()), 0o600); err != nil {
		t.Fatal(err)
	}
	for i := range servers {
		link := c.etcd.Link(t)
		n := &node{link: link, offset: offsets[i], srv: acked.Server{
			Binary:  binary,
			DataDir: filepath.Join(dir, fmt.Sprintf("s%d", i)),
			Log:     filepath.Join(dir, fmt.Sprintf("s%d.log", i)),
			Addr:    acked.FreeAddr(t),
			Extra: []string{
				"-store=etcd", "-etcd-endpoints=" + strings.Join(link.Endpoints, ","), "-etcd-prefix=/ha/",
				"-resume-key-file=" + resumeKey,
				// The load is the test's; the servers' limits are tested
				// elsewhere.
				"-rate-limit=0", "-max-changes=1000000",
			},
			Env: []string{"SETPOINT_TEST_CLOCK_OFFSET=" + offsets[i].String()},
		}}
		n.probe = acked.Dial(t, n.srv.Addr)
		n.proc, _ = n.srv.Start(t, n.probe)
		c.nodes = append(c.nodes, n)
	}
	t.Cleanup(func() {
		for _, n := range c.nodes {
			n.mu.Lock()
			if n.proc != nil {
				_ = n.proc.Process.Signal(syscall.SIGTERM)
				if err := n.proc.Wait(); err != nil {
					t.Errorf("%s after SIGTERM: %v", n.srv.Addr, err)
				}
				n.proc = nil
			}
			n.mu.Unlock()
			if t.Failed() {
				b, _ := os.ReadFile(n.srv.Log)
				lines := strings.Split(strings.TrimSpace(string(b)), "\n")
				t.Logf("%s:\n%s", n.srv.Log, strings.Join(lines[max(0, len(lines)-15):], "\n"))
			}
		}
	})
	return c
}

// kill sends SIGKILL to server i and waits for it to exit.
func (c *cluster) kill(i int) {
	n := c.nodes[i]
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.proc != nil {
		_ = n.proc.Process.Kill()
		_ = n.proc.Wait()
		n.proc = nil
	}
}

// restart starts server i again and returns how long it took to answer a
// Recommend.
func (c *cluster) restart(t *testing.T, i int) time.Duration {
	t.Helper()
	n := c.nodes[i]
	proc, took := n.srv.Start(t, n.probe)
	n.mu.Lock()
	n.proc = proc
	n.mu.Unlock()
	return took
}

// dial returns a client of every server, in server order, closed at
// cleanup; a client reconnects quickly once its server is back.
func (c *cluster) dial(t *testing.T) []*setpointclient.Client {
	t.Helper()
	var cs []*setpointclient.Client
	for _, n := range c.nodes {
		cl, err := setpointclient.Dial(n.srv.Addr, setpointclient.Options{
			DialOptions: []grpc.DialOption{grpc.WithConnectParams(acked.FastReconnect)},
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cl.Close() })
		cs = append(cs, cl)
	}
	return cs
}

// addrs is every server's address, comma-separated: a client of all.
func (c *cluster) addrs() string {
	var out []string
	for _, n := range c.nodes {
		out = append(out, n.srv.Addr)
	}
	return strings.Join(out, ",")
}

// leader returns the etcd leader's index, waiting for an election to end.
func (c *cluster) leader(t *testing.T) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		i, err := c.etcd.Leader(ctx)
		if err == nil {
			return i
		}
		if ctx.Err() != nil {
			t.Fatalf("no etcd leader within 30s: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
