package crash

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/setpointhq/setpoint/internal/testkit"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	bolt "go.etcd.io/bbolt"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

var (
	kills   = flag.Int("crash.kills", 20, "how many times the server is killed")
	workers = flag.Int("crash.workers", 8, "concurrent callers")
	seed    = flag.Uint64("crash.seed", 0, "random seed of the kill moments (0: from the clock)")
	maxUp   = flag.Duration("crash.max-up", 400*time.Millisecond, "longest time the server runs between kills")
)

// serverArgs are the arguments the test runs setpoint-server with. They are
// here, in one place, so that a change of the binary's flags is one edit.
func serverArgs(addr, dataDir string) []string {
	// -insecure-dev: plaintext without authentication on loopback, the
	// binary's development mode; the crash test is about the store.
	return []string{"-insecure-dev", "-listen", addr, "-metrics-listen=", "-data-dir", dataDir, "-shutdown-timeout", "1s"}
}

// serveWithin is how soon a restarted server must answer a Recommend.
const serveWithin = time.Second

// binary is the setpoint-server binary the test built.
var binary string

func TestMain(m *testing.M) {
	flag.Parse()
	dir, err := os.MkdirTemp("", "setpoint-crash")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "setpoint-server")
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	build := exec.Command(goTool, "build", "-o", binary, "github.com/setpointhq/setpoint/cmd/setpoint-server")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	code := 1
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build setpoint-server:", err)
	} else {
		code = m.Run()
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// ack is one acknowledged call.
type ack struct {
	target     string
	decisionID string
	// at is the decision time of an acknowledged Recommend; zero for an
	// Observe.
	at time.Time
}

// ledger collects the acknowledged calls of every worker.
type ledger struct {
	mu         sync.Mutex
	recommends []ack
	observes   []ack
	failed     int // calls that failed (server down or killed): not acknowledged
}

func (l *ledger) add(list *[]ack, a ack) {
	l.mu.Lock()
	defer l.mu.Unlock()
	*list = append(*list, a)
}

func (l *ledger) fail() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.failed++
}

// TestCrash kills the server under load and checks that nothing
// acknowledged was lost.
func TestCrash(t *testing.T) {
	s := *seed
	if s == 0 {
		s = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -crash.seed=%d)", s, s)
	rng := rand.New(rand.NewPCG(s, s))

	dir := t.TempDir()
	addr := freeAddr(t)
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(fastReconnect))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := setpointv1.NewAutoscalerServiceClient(conn)

	var (
		led  ledger
		wg   sync.WaitGroup
		stop = make(chan struct{})
	)
	for w := range *workers {
		wg.Go(func() { work(client, w, stop, &led) })
	}

	var worstStart time.Duration
	for k := 0; k <= *kills; k++ {
		proc, took := startServer(t, dir, addr, client)
		worstStart = max(worstStart, took)
		if k == *kills {
			// The last start: stop the load, then read everything back.
			close(stop)
			wg.Wait()
			verify(t, client, &led)
			if err := proc.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			if err := proc.Wait(); err != nil {
				t.Errorf("server after SIGTERM: %v", err)
			}
			break
		}
		time.Sleep(time.Duration(rng.Int64N(int64(*maxUp))))
		if err := proc.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		_ = proc.Wait()
		checkFile(t, filepath.Join(dir, "setpoint.db"))
	}
	t.Logf("kills %d, acknowledged Recommend %d, Observe %d, unacknowledged (failed) calls %d, slowest restart to first decision %v",
		*kills, len(led.recommends), len(led.observes), led.failed, worstStart)
	if worstStart > serveWithin {
		t.Errorf("a restarted server took %v to decide, want ≤ %v", worstStart, serveWithin)
	}
	if len(led.recommends) < *kills || len(led.observes) < *kills {
		t.Errorf("too little load to mean anything: %d Recommend, %d Observe acknowledged", len(led.recommends), len(led.observes))
	}
}

// TestSIGTERMUnderLoad: SIGTERM while callers keep calling; the server
// exits 0 within its shutdown timeout, and after a restart every
// acknowledged call is there.
func TestSIGTERMUnderLoad(t *testing.T) {
	dir := t.TempDir()
	addr := freeAddr(t)
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithConnectParams(fastReconnect))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := setpointv1.NewAutoscalerServiceClient(conn)
	var (
		led  ledger
		wg   sync.WaitGroup
		stop = make(chan struct{})
	)
	proc, _ := startServer(t, dir, addr, client)
	for w := range *workers {
		wg.Go(func() { work(client, w, stop, &led) })
	}
	time.Sleep(300 * time.Millisecond)
	began := time.Now()
	if err := proc.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := proc.Wait(); err != nil {
		t.Errorf("server after SIGTERM: %v, want exit 0", err)
	}
	t.Logf("stopped %v after SIGTERM", time.Since(began))
	close(stop)
	wg.Wait()
	checkFile(t, filepath.Join(dir, "setpoint.db"))
	proc, _ = startServer(t, dir, addr, client)
	defer func() { _ = proc.Process.Signal(syscall.SIGTERM); _ = proc.Wait() }()
	verify(t, client, &led)
}

// fastReconnect keeps the client's reconnect back-off short, so that the
// load resumes as soon as the server is back.
var fastReconnect = grpc.ConnectParams{MinConnectTimeout: time.Second}

// startServer starts setpoint-server on the store in dir and returns once
// it has answered a Recommend, with the time that took.
func startServer(t *testing.T, dir, addr string, client setpointv1.AutoscalerServiceClient) (*exec.Cmd, time.Duration) {
	t.Helper()
	cmd := exec.Command(binary, serverArgs(addr, dir)...)
	logFile, err := os.OpenFile(filepath.Join(dir, "server.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	cmd.Stdout, cmd.Stderr = logFile, logFile
	began := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		cctx, ccancel := context.WithTimeout(ctx, 200*time.Millisecond)
		_, err := client.Recommend(cctx, recommend("probe", 2, time.Now()), grpc.WaitForReady(true))
		ccancel()
		if err == nil {
			return cmd, time.Since(began)
		}
		if ctx.Err() != nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			log, _ := os.ReadFile(filepath.Join(dir, "server.log"))
			t.Fatalf("server did not serve within 10s: %v\n%s", err, log)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Each worker spreads its calls over targetsPerWorker targets at a time and
// moves on to fresh ones after callsPerTarget calls each, so that no target
// gets more observed events than the store keeps (64), however long the
// run.
const (
	targetsPerWorker = 64
	callsPerTarget   = 32
)

// work calls Recommend and then Observe(applied) for its targets in turn
// until stop, recording what was acknowledged. Calls that fail are retried
// on the next turn; they were never acknowledged.
func work(client setpointv1.AutoscalerServiceClient, w int, stop <-chan struct{}, led *ledger) {
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		target := fmt.Sprintf("w%d-t%d", w, i%targetsPerWorker+targetsPerWorker*(i/(targetsPerWorker*callsPerTarget)))
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		resp, err := client.Recommend(ctx, recommend(target, 2+i%3, time.Now()))
		if err != nil {
			cancel()
			led.fail()
			time.Sleep(2 * time.Millisecond)
			continue
		}
		d := resp.GetDecision()
		led.add(&led.recommends, ack{target: target, decisionID: d.GetDecisionId(), at: d.GetDecisionTime().AsTime()})
		_, err = client.Observe(ctx, &setpointv1.ObserveRequest{
			Target: key(target), DecisionId: d.GetDecisionId(),
			Change: &setpointv1.ObserveRequest_Applied{Applied: &setpointv1.AppliedChange{From: int32(2 + i%3), To: d.GetDesiredReplicas()}},
		})
		cancel()
		if err != nil {
			led.fail()
			continue
		}
		led.add(&led.observes, ack{target: target, decisionID: d.GetDecisionId()})
	}
}

// verify reads every target back and checks that each acknowledged
// Recommend left its recommendation (at its decision time) in the history
// and each acknowledged Observe its Applied event.
func verify(t *testing.T, client setpointv1.AutoscalerServiceClient, led *ledger) {
	t.Helper()
	type found struct {
		recs   map[time.Time]bool
		events map[string]bool
	}
	targets := map[string]*found{}
	read := func(target string) *found {
		if f, ok := targets[target]; ok {
			return f
		}
		resp, err := client.GetTarget(context.Background(), &setpointv1.GetTargetRequest{Target: key(target)})
		if err != nil {
			t.Fatalf("GetTarget %s: %v", target, err)
		}
		f := &found{recs: map[time.Time]bool{}, events: map[string]bool{}}
		for _, r := range resp.GetTarget().GetHistory().GetRecommendations() {
			f.recs[r.GetTime().AsTime()] = true
		}
		for _, e := range resp.GetTarget().GetEvents() {
			if e.GetKind() == "Applied" {
				f.events[e.GetDecisionId()] = true
			}
		}
		targets[target] = f
		return f
	}
	var foundRecs, foundObs, lost int
	for _, a := range led.recommends {
		if read(a.target).recs[a.at] {
			foundRecs++
		} else {
			lost++
			t.Errorf("acknowledged Recommend of %s at %v (decision %s) is not in the history", a.target, a.at, a.decisionID)
		}
	}
	for _, a := range led.observes {
		if read(a.target).events[a.decisionID] {
			foundObs++
		} else {
			lost++
			t.Errorf("acknowledged Observe of %s (decision %s) is not in the events", a.target, a.decisionID)
		}
	}
	t.Logf("acked %d (Recommend %d, Observe %d), found %d, lost %d",
		len(led.recommends)+len(led.observes), len(led.recommends), len(led.observes), foundRecs+foundObs, lost)
}

// checkFile runs bbolt's consistency check over the store file.
func checkFile(t *testing.T, path string) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: 5 * time.Second})
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return // killed before the first start created it
		}
		t.Fatalf("open %s after kill: %v", path, err)
	}
	defer db.Close()
	if err := db.View(func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			t.Errorf("consistency check after kill: %v", err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// freeAddr returns a loopback address with a port free at the time of the
// call; every restart of the server listens on it.
func freeAddr(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	return lis.Addr().String()
}

func key(name string) *setpointv1.TargetKey {
	return &setpointv1.TargetKey{Cluster: "crash", Namespace: "ns", Name: name}
}

// recommend is a valid Recommend request for target with n running pods at
// 80% of their cpu request against a 50% target.
func recommend(target string, n int, now time.Time) *setpointv1.RecommendRequest {
	req := &setpointv1.RecommendRequest{
		Target: key(target),
		Spec: &setpointv1.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: &setpointv1.CrossVersionObjectReference{ApiVersion: "apps/v1", Kind: "Deployment", Name: target},
			MinReplicas:    testkit.Ptr[int32](1),
			MaxReplicas:    50,
			Metrics: []*setpointv1.MetricSpec{{Type: "Resource", Resource: &setpointv1.ResourceMetricSource{
				Name: "cpu", Target: &setpointv1.MetricTarget{Type: "Utilization", AverageUtilization: testkit.Ptr[int32](50)}}}},
		},
		// Recommendations are kept for the stabilization window: an hour
		// keeps every one of even a long run.
		Settings:        &setpointv1.ControllerSettings{DownscaleStabilizationWindow: durationpb.New(time.Hour)},
		Scale:           &setpointv1.Scale{Replicas: int32(n), StatusReplicas: int32(n), Selector: "app=" + target},
		ResourceMetrics: &setpointv1.ResourceMetrics{},
		Observations:    []*setpointv1.MetricObservation{{}},
	}
	for i := range n {
		pod := fmt.Sprintf("%s-%d", target, i)
		start := timestamppb.New(now.Add(-time.Hour))
		req.Pods = append(req.Pods, &setpointv1.Pod{
			Name: pod, Phase: "Running", StartTime: start,
			Ready:      &setpointv1.PodReadyCondition{Status: "True", LastTransitionTime: start},
			Containers: []*setpointv1.Container{{Name: "app", Requests: map[string]string{"cpu": "500m"}}},
		})
		req.ResourceMetrics.Items = append(req.ResourceMetrics.Items, &setpointv1.PodMetrics{
			Pod: pod, Timestamp: timestamppb.New(now.Add(-15 * time.Second)), Window: durationpb.New(30 * time.Second),
			Containers: []*setpointv1.ContainerMetrics{{Name: "app", Usage: map[string]string{"cpu": "400m"}}},
		})
	}
	return req
}

// TestBackupRestoreWithBinary follows docs/reliability.md's restore with the
// real binary: a backup taken over AdminService.Backup while callers keep
// calling, the server killed, the backup put in place of the store file in
// a new data directory, the binary started on it: every call acknowledged
// before the backup began is there.
func TestBackupRestoreWithBinary(t *testing.T) {
	dir := t.TempDir()
	addr := freeAddr(t)
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithConnectParams(fastReconnect))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := setpointv1.NewAutoscalerServiceClient(conn)
	proc, _ := startServer(t, dir, addr, client)

	var (
		before ledger
		wg     sync.WaitGroup
		stop   = make(chan struct{})
	)
	for w := range 2 {
		wg.Go(func() { work(client, w, stop, &before) })
	}
	time.Sleep(200 * time.Millisecond)
	close(stop)
	wg.Wait()
	// More callers keep writing while the backup streams.
	var during ledger
	stop = make(chan struct{})
	for w := range 4 {
		wg.Go(func() { work(client, 100+w, stop, &during) })
	}
	time.Sleep(50 * time.Millisecond)
	snap := backupOf(t, conn)
	close(stop)
	wg.Wait()
	_ = proc.Process.Kill()
	_ = proc.Wait()

	restored := filepath.Join(t.TempDir(), "restored")
	if err := os.MkdirAll(restored, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(restored, "setpoint.db"), snap, 0o600); err != nil {
		t.Fatal(err)
	}
	checkFile(t, filepath.Join(restored, "setpoint.db"))
	proc, _ = startServer(t, restored, addr, client)
	defer func() { _ = proc.Process.Signal(syscall.SIGTERM); _ = proc.Wait() }()
	verify(t, client, &before)
	t.Logf("backup of %d bytes taken while %d more calls were acknowledged", len(snap), len(during.recommends)+len(during.observes))
}

// backupOf calls AdminService.Backup and checks size and checksum.
func backupOf(t *testing.T, conn *grpc.ClientConn) []byte {
	t.Helper()
	stream, err := setpointv1.NewAdminServiceClient(conn).Backup(t.Context(), &setpointv1.BackupRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var (
		data []byte
		size int64
		sum  []byte
	)
	for first := true; ; first = false {
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("Backup: %v", err)
		}
		if first {
			size = m.GetSize()
		}
		data = append(data, m.GetData()...)
		sum = m.GetSha256()
	}
	if want := sha256.Sum256(data); int64(len(data)) != size || !bytes.Equal(sum, want[:]) {
		t.Fatalf("Backup: %d bytes (announced %d), sha256 %x (announced %x)", len(data), size, want, sum)
	}
	return data
}
