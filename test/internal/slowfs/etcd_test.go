package slowfs

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/setpointhq/setpoint/internal/etcdtest"
)

// TestEtcdMemberOnSlowDisk runs one member of a real etcd cluster on a
// mount, with fsync on: its WAL syncs reach the filesystem, and while they
// are slow the other two commit without it (a write through one of them
// does not wait for the slow disk) and its own linearizable reads stall.
func TestEtcdMemberOnSlowDisk(t *testing.T) {
	backing, mnt := t.TempDir(), t.TempDir()
	d, err := Mount(backing, mnt)
	if err != nil {
		t.Fatalf("mount slowfs (needs /dev/fuse and root): %v", err)
	}
	t.Cleanup(func() {
		if err := d.Unmount(); err != nil {
			t.Error(err)
		}
	})
	c := etcdtest.StartWith(t, etcdtest.Options{Members: 3, SyncedDirs: map[int]string{0: filepath.Join(mnt, "data")}})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := c.MoveLeader(ctx, 1); err != nil {
		t.Fatal(err)
	}
	fast, slow := client(t, c.Endpoints[1]), client(t, c.Endpoints[0])
	if _, err := fast.Put(ctx, "k", "before"); err != nil {
		t.Fatal(err)
	}
	if _, err := slow.Get(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	if syncs, _ := d.Stats(); syncs == 0 {
		t.Fatal("the member on the mount never synced: it runs without fsync")
	}

	d.SetDelay(3 * time.Second)
	began := time.Now()
	if _, err := fast.Put(ctx, "k", "during"); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(began); took > 2*time.Second {
		t.Errorf("a write through a member with a fast disk took %v while the third member's fsync takes 3s", took)
	}
	// A linearizable read on the slow member waits for its disk: it
	// stalls until its fsync returns, well past a probe's 750 ms.
	rctx, rcancel := context.WithTimeout(ctx, time.Second)
	_, err = slow.Get(rctx, "k")
	rcancel()
	if err == nil {
		t.Error("a linearizable read on the member whose fsync takes 3s answered within 1s")
	}
	d.SetDelay(0)
	if _, delayed := d.Stats(); delayed == 0 {
		t.Error("no fsync was delayed")
	}
	if err := c.WaitInSync(ctx); err != nil {
		t.Fatal(err)
	}
	resp, err := slow.Get(ctx, "k")
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "during" {
		t.Fatalf("after the disk healed the slow member reads %v (%v), want %q", resp, err, "during")
	}
}

func client(t *testing.T, endpoint string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}
