package powerloss

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"github.com/setpointhq/setpoint/test/internal/acked"
	"github.com/setpointhq/setpoint/test/internal/lazyfs"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

var (
	cuts    = flag.Int("powerloss.cuts", 20, "how many times power is cut")
	workers = flag.Int("powerloss.workers", 8, "concurrent callers")
	seed    = flag.Uint64("powerloss.seed", 0, "random seed of the cut moments (0: from the clock)")
	maxUp   = flag.Duration("powerloss.max-up", 400*time.Millisecond, "longest time the server runs between cuts")
)

// binary is the setpoint-server binary the test built.
var binary string

func TestMain(m *testing.M) {
	flag.Parse()
	dir, err := os.MkdirTemp("", "setpoint-powerloss")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := 1
	if binary, err = acked.BuildServer(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
	} else {
		code = m.Run()
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// TestPowerLoss cuts power under load and checks that nothing acknowledged
// was lost.
func TestPowerLoss(t *testing.T) {
	s := *seed
	if s == 0 {
		s = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -powerloss.seed=%d)", s, s)
	rng := rand.New(rand.NewPCG(s, s))

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
	srv := acked.Server{Binary: binary, DataDir: mnt, Log: filepath.Join(t.TempDir(), "server.log"), Addr: acked.FreeAddr(t)}
	conn, err := grpc.NewClient(srv.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithConnectParams(acked.FastReconnect))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := setpointv1.NewAutoscalerServiceClient(conn)

	var (
		led  acked.Ledger
		wg   sync.WaitGroup
		stop = make(chan struct{})
	)
	for w := range *workers {
		wg.Go(func() { acked.Work(client, w, stop, &led) })
	}
	checked := filepath.Join(t.TempDir(), "setpoint.db")
	var worstStart time.Duration
	for k := 0; k <= *cuts; k++ {
		proc, took := srv.Start(t, client)
		worstStart = max(worstStart, took)
		if k == *cuts {
			// The last start: stop the load, then read everything back.
			close(stop)
			wg.Wait()
			acked.Verify(t, client, &led)
			if err := proc.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			if err := proc.Wait(); err != nil {
				t.Errorf("server after SIGTERM: %v", err)
			}
			break
		}
		time.Sleep(time.Duration(rng.Int64N(int64(*maxUp))))
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
		if t.Failed() {
			t.FailNow()
		}
	}
	syncs, made, dropped := disk.Stats()
	t.Logf("cuts %d, fsyncs %d, unsynced pages dropped %d, acknowledged Recommend %d, Observe %d, unacknowledged (failed) calls %d, slowest restart to first decision %v",
		made, syncs, dropped, len(led.Recommends), len(led.Observes), led.Failed, worstStart)
	// The restart time is reported, not checked: through FUSE on a shared
	// machine it measures the machine; test/crash checks it on a real disk.
	if len(led.Recommends) < *cuts || len(led.Observes) < *cuts {
		t.Errorf("too little load to mean anything: %d Recommend, %d Observe acknowledged", len(led.Recommends), len(led.Observes))
	}
}
