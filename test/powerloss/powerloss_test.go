package powerloss

import (
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/setpointhq/setpoint/test/internal/acked"
	"github.com/setpointhq/setpoint/test/internal/lazyfs"
)

var (
	cuts    = flag.Int("powerloss.cuts", 20, "how many times power is cut")
	workers = flag.Int("powerloss.workers", 8, "concurrent callers")
	seed    = flag.Uint64("powerloss.seed", 0, "random seed of the cut moments (0: from the clock)")
	maxUp   = flag.Duration("powerloss.max-up", 400*time.Millisecond, "longest time the server runs between cuts")
	// Far shorter than the server's default (1 s), so that cuts land both
	// while answered writes are only in the journal and while a
	// checkpoint is writing them into the bbolt file.
	checkpoint = flag.Duration("powerloss.checkpoint-interval", 20*time.Millisecond, "the server's -checkpoint-interval")
	segment    = flag.Int64("powerloss.journal-segment-bytes", 256<<10, "the server's -journal-segment-bytes: small, so that cuts also fall around the journal's rotations")
)

// binary is the setpoint-server binary the test built.
var binary string

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(acked.Main(m, &binary))
}

// TestPowerLoss cuts power under load and checks that nothing acknowledged
// was lost.
func TestPowerLoss(t *testing.T) {
	rng := acked.Seeded(t, *seed, "powerloss.seed")
	mnt := filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(mnt, 0o700); err != nil {
		t.Fatal(err)
	}
	disk := lazyfs.New()
	if err := disk.Mount(mnt); err != nil {
		t.Fatalf("mount lazyfs (needs /dev/fuse and root): %v", err)
	}
	defer func() {
		if err := disk.Unmount(); err != nil {
			t.Error(err)
		}
	}()
	srv := acked.Server{Binary: binary, DataDir: mnt, Log: filepath.Join(t.TempDir(), "server.log"), Addr: acked.FreeAddr(t),
		Extra: []string{"-checkpoint-interval", checkpoint.String(), "-journal-segment-bytes", strconv.FormatInt(*segment, 10)}}
	client := acked.Dial(t, srv.Addr)
	load := acked.StartLoad(client, 0, *workers)
	checked := filepath.Join(t.TempDir(), "setpoint.db")
	slowest := acked.Interrupted(t, srv, client, load, *cuts, rng, *maxUp, func(proc *exec.Cmd) {
		// The cut: the process dies with the machine, the filesystem
		// forgets what was not fsynced.
		if err := proc.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		_ = proc.Wait()
		if err := disk.Unmount(); err != nil {
			t.Fatal(err)
		}
		disk.Cut()
		if err := disk.Mount(mnt); err != nil {
			t.Fatal(err)
		}
		// The check reads a copy of what survived: this process serves
		// the mount, and must never fault on its own pages (an mmap of a
		// file on the mount would deadlock it with the garbage collector).
		if data, ok := disk.Durable("setpoint.db"); ok {
			if err := os.WriteFile(checked, data, 0o600); err != nil {
				t.Fatal(err)
			}
			acked.CheckFile(t, checked)
		}
	})
	syncs, made, dropped := disk.Stats()
	led := &load.Ledger
	// The restart time is reported, not checked: through FUSE on a shared
	// machine it measures the machine; test/crash checks it on a real disk.
	t.Logf("cuts %d, fsyncs %d, unsynced pages dropped %d, acknowledged Recommend %d, Observe %d, unacknowledged (failed) calls %d, slowest restart to first decision %v",
		made, syncs, dropped, len(led.Recommends), len(led.Observes), led.Failed, slowest)
}
