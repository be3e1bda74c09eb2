package slowdisk

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"github.com/setpointhq/setpoint/test/internal/acked"
	"github.com/setpointhq/setpoint/test/internal/slowfs"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

var (
	delay   = flag.Duration("slowdisk.delay", 3*time.Second, "how much longer each fsync takes while the disk is slow")
	stall   = flag.Duration("slowdisk.stall", 6*time.Second, "how long the disk stays slow")
	workers = flag.Int("slowdisk.workers", 4, "concurrent callers of the load (2 s deadlines)")
)

// The deadlines of the probes, and the server's -call-timeout for calls
// without one. slack is what a loaded 2-core machine may add to a call
// that ends at its deadline: scheduling, not the disk.
const (
	callTimeout = time.Second
	deadline    = 500 * time.Millisecond
	slack       = time.Second
)

// binary is the setpoint-server binary the test built.
var binary string

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(acked.Main(m, &binary))
}

// TestSlowDisk runs the bbolt server on a disk whose fsync stalls for
// -slowdisk.delay during -slowdisk.stall, under load, and checks what
// callers and the metrics see during the stall and after it.
func TestSlowDisk(t *testing.T) {
	backing, mnt := t.TempDir(), t.TempDir()
	disk, err := slowfs.Mount(backing, mnt)
	switch {
	case err == nil:
	case os.Geteuid() == 0:
		t.Fatalf("mount slowfs (needs /dev/fuse): %v", err)
	default:
		t.Skipf("mounting slowfs needs root and /dev/fuse: %v", err)
	}
	unmounted := false
	unmount := func() {
		if unmounted {
			return
		}
		unmounted = true
		if err := disk.Unmount(); err != nil {
			t.Error(err)
		}
	}
	t.Cleanup(unmount) // after the server's cleanup below: registered first

	dir := t.TempDir()
	metricsAddr := acked.FreeAddr(t)
	srv := acked.Server{
		Binary:  binary,
		DataDir: filepath.Join(mnt, "data"),
		Log:     filepath.Join(dir, "server.log"),
		Addr:    acked.FreeAddr(t),
		Extra:   []string{"-metrics-listen=" + metricsAddr, "-call-timeout=" + callTimeout.String()},
	}
	client := acked.Dial(t, srv.Addr)
	proc, _ := srv.Start(t, client)
	exited := false
	t.Cleanup(func() {
		if !exited {
			_ = proc.Process.Kill()
			_ = proc.Wait()
		}
		if t.Failed() {
			log, _ := os.ReadFile(srv.Log)
			t.Logf("server log:\n%s", log)
		}
	})
	gauge := func() float64 {
		t.Helper()
		v, err := syncInProgress(metricsAddr)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}

	// A target written before the stall, read during it.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	before, err := client.Recommend(ctx, acked.Recommend("before", 3, time.Now()))
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	load := acked.StartLoad(client, 0, *workers)
	loadStopped := false
	defer func() {
		if !loadStopped {
			load.Stop()
		}
	}()
	time.Sleep(300 * time.Millisecond)

	disk.SetDelay(*delay)
	stalled := time.Now()
	// Probes at once, once the load's writes are held: callers with and
	// without a deadline, a read of one target, a list.
	time.Sleep(200 * time.Millisecond)
	type result struct {
		code codes.Code
		took time.Duration
	}
	var withDeadline, without, read, list result
	var wg sync.WaitGroup
	probe := func(r *result, timeout time.Duration, call func(ctx context.Context) error) {
		wg.Go(func() {
			ctx, cancel := context.Background(), context.CancelFunc(func() {})
			if timeout > 0 {
				ctx, cancel = context.WithTimeout(ctx, timeout)
			}
			defer cancel()
			began := time.Now()
			err := call(ctx)
			r.code, r.took = status.Code(err), time.Since(began)
		})
	}
	probe(&withDeadline, deadline, func(ctx context.Context) error {
		_, err := client.Recommend(ctx, acked.Recommend("with-deadline", 2, time.Now()))
		return err
	})
	probe(&without, 0, func(ctx context.Context) error {
		_, err := client.Recommend(ctx, acked.Recommend("without-deadline", 2, time.Now()))
		return err
	})
	probe(&read, deadline, func(ctx context.Context) error {
		resp, err := client.GetTarget(ctx, &setpointv1.GetTargetRequest{Target: acked.Key("before")})
		if err == nil && resp.GetTarget().GetLastDecision().GetDecisionId() != before.GetDecision().GetDecisionId() {
			return status.Errorf(codes.DataLoss, "GetTarget during the stall: last decision %s, want %s",
				resp.GetTarget().GetLastDecision().GetDecisionId(), before.GetDecision().GetDecisionId())
		}
		return err
	})
	probe(&list, 0, func(ctx context.Context) error {
		_, err := client.ListTargets(ctx, &setpointv1.ListTargetsRequest{Cluster: "crash"})
		return err
	})

	// Meanwhile the gauge shows the stall: a sync older than a third of
	// the delay is one the disk holds (a healthy one takes milliseconds).
	// The first scrape is also the first count of the targets, which
	// waits for the stalled checkpointer: bounded, not a hang.
	began := time.Now()
	first := gauge()
	firstScrape := time.Since(began)
	if firstScrape > callTimeout+slack {
		t.Errorf("the first scrape of /metrics during the stall took %v", firstScrape)
	}
	samples := []string{fmt.Sprintf("%.2f at %v", first, time.Since(stalled).Round(time.Millisecond))}
	for g := first; g < delay.Seconds()/3; {
		// Each scrape takes about a second here (the count waits for
		// the checkpointer): the stall leaves room for several.
		if time.Since(stalled) > *stall {
			t.Fatalf("setpoint_bolt_sync_in_progress_seconds never reached %.0f s in a stall of %v fsyncs: %s", delay.Seconds()/3, *delay, strings.Join(samples, ", "))
		}
		time.Sleep(50 * time.Millisecond)
		g = gauge()
		samples = append(samples, fmt.Sprintf("%.2f at %v", g, time.Since(stalled).Round(time.Millisecond)))
	}
	seen := time.Since(stalled)
	wg.Wait()

	t.Logf("gauge above %.0f s %v into the stall (first scrape took %v; samples %s); Recommend with a %v deadline: %v after %v; without a deadline (-call-timeout %v): %v after %v; GetTarget: %v after %v; ListTargets without a deadline: %v after %v",
		delay.Seconds()/3, seen.Round(time.Millisecond), firstScrape.Round(time.Millisecond), strings.Join(samples, ", "), deadline, withDeadline.code, withDeadline.took.Round(time.Millisecond),
		callTimeout, without.code, without.took.Round(time.Millisecond), read.code, read.took.Round(time.Millisecond),
		list.code, list.took.Round(time.Millisecond))
	if withDeadline.code != codes.DeadlineExceeded || withDeadline.took > deadline+slack {
		t.Errorf("Recommend with a %v deadline during the stall: %v after %v, want DeadlineExceeded at its deadline", deadline, withDeadline.code, withDeadline.took)
	}
	if (without.code != codes.DeadlineExceeded && without.code != codes.Unavailable) || without.took < callTimeout/2 || without.took > callTimeout+slack {
		t.Errorf("Recommend without a deadline during the stall: %v after %v, want DeadlineExceeded or Unavailable at -call-timeout %v", without.code, without.took, callTimeout)
	}
	if read.code != codes.OK {
		t.Errorf("GetTarget during the stall: %v after %v, want it served", read.code, read.took)
	}
	// List walks bbolt behind the checkpointer, which the disk holds:
	// served or ended by the server's bound, never a hang.
	if (list.code != codes.OK && list.code != codes.DeadlineExceeded) || list.took > callTimeout+slack {
		t.Errorf("ListTargets without a deadline during the stall: %v after %v, want an answer or DeadlineExceeded within -call-timeout %v", list.code, list.took, callTimeout)
	}

	// The disk heals: writes succeed again.
	time.Sleep(time.Until(stalled.Add(*stall)))
	disk.SetDelay(0)
	healed := time.Now()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := client.Recommend(ctx, acked.Recommend("after", 2, time.Now()))
		cancel()
		if err == nil {
			break
		}
		if time.Since(healed) > 10*time.Second {
			t.Fatalf("no write acknowledged within 10s of the disk healing: %v", err)
		}
	}
	firstWrite := time.Since(healed)
	time.Sleep(500 * time.Millisecond) // load after the stall
	load.Stop()
	loadStopped = true
	// Idle and healed: no sync in progress once the last checkpoint ends.
	for g := gauge(); g != 0; g = gauge() {
		if time.Since(healed) > 10*time.Second {
			t.Fatalf("setpoint_bolt_sync_in_progress_seconds = %v on an idle healed disk", g)
		}
		time.Sleep(50 * time.Millisecond)
	}
	led := &load.Ledger
	t.Logf("stall of %v (fsync +%v): first write %v after the heal; the load's acknowledged Recommend %d, Observe %d, failed calls %d",
		*stall, *delay, firstWrite.Round(time.Millisecond), len(led.Recommends), len(led.Observes), led.Failed)
	if len(led.Recommends) == 0 || led.Failed == 0 {
		t.Errorf("the load had %d acknowledged and %d failed calls: no stall seen", len(led.Recommends), led.Failed)
	}
	if _, lost := acked.Verify(t, client, led); lost != 0 {
		t.Errorf("%d acknowledged calls lost", lost)
	}
	if syncs, delayed := disk.Stats(); delayed == 0 {
		t.Errorf("slowfs delayed none of %d syncs", syncs)
	}

	if err := proc.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	exited = true
	if err := proc.Wait(); err != nil {
		t.Errorf("server after SIGTERM: %v", err)
	}
	unmount()
	// Read on the backing directory: this process serves the mount and
	// must not mmap its files.
	acked.CheckFile(t, filepath.Join(backing, "data", "setpoint.db"))
}

// syncInProgress scrapes the server's setpoint_bolt_sync_in_progress_seconds.
func syncInProgress(addr string) (float64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("scrape /metrics: %w", err)
	}
	defer resp.Body.Close()
	const name = "setpoint_bolt_sync_in_progress_seconds "
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name); ok {
			return strconv.ParseFloat(v, 64)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, errors.New("/metrics has no setpoint_bolt_sync_in_progress_seconds")
}
