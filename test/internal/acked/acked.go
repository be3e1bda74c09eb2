// Package acked is the load and the check of the durability tests
// (test/crash, test/powerloss; test/ha runs its servers with it): it builds and starts the real
// setpoint-server binary, drives it with Recommend and Observe calls while
// recording which were acknowledged, and checks afterwards that every
// acknowledged call is in the store and that the bbolt file passes its
// consistency check.
package acked

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/setpointhq/setpoint/internal/testkit"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	bolt "go.etcd.io/bbolt"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// BuildServer builds setpoint-server into dir, with the build tags given
// (e.g. testclock, cmd/setpoint-server/clock_testclock.go), and returns
// the binary's path.
func BuildServer(dir string, tags ...string) (string, error) {
	binary := filepath.Join(dir, "setpoint-server")
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	build := exec.Command(goTool, "build", "-tags="+strings.Join(tags, ","), "-o", binary, "github.com/setpointhq/setpoint/cmd/setpoint-server")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return "", fmt.Errorf("build setpoint-server: %w", err)
	}
	return binary, nil
}

// Server is how a test runs setpoint-server.
type Server struct {
	// Binary is the setpoint-server binary (BuildServer).
	Binary string
	// DataDir is the directory of the store file.
	DataDir string
	// Log is the file the server's output is appended to.
	Log string
	// Addr is the loopback address every start listens on.
	Addr string
	// Extra are more flags, after (and so overriding) the common ones:
	// e.g. -store=etcd and its endpoints (test/ha).
	Extra []string
	// Env are more environment variables (KEY=value) on top of the
	// test's own.
	Env []string
}

// Args are the arguments the server runs with. They are here, in one
// place, so that a change of the binary's flags is one edit.
func (s Server) Args() []string {
	// -insecure-dev: plaintext without authentication on loopback, the
	// binary's development mode; these tests are about the store.
	args := []string{"-insecure-dev", "-listen", s.Addr, "-metrics-listen=", "-data-dir", s.DataDir, "-shutdown-timeout", "1s"}
	return append(args, s.Extra...)
}

// Start starts the server and returns once it has answered a Recommend,
// with the time that took.
func (s Server) Start(t *testing.T, client setpointv1.AutoscalerServiceClient) (*exec.Cmd, time.Duration) {
	t.Helper()
	cmd := exec.Command(s.Binary, s.Args()...)
	if s.Env != nil {
		cmd.Env = append(os.Environ(), s.Env...)
	}
	logFile, err := os.OpenFile(s.Log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
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
		_, err := client.Recommend(cctx, Recommend("probe", 2, time.Now()), grpc.WaitForReady(true))
		ccancel()
		if err == nil {
			return cmd, time.Since(began)
		}
		if ctx.Err() != nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			log, _ := os.ReadFile(s.Log)
			t.Fatalf("server did not serve within 10s: %v\n%s", err, log)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// FastReconnect keeps a client's reconnect back-off short, so that the load
// resumes as soon as the server is back.
var FastReconnect = grpc.ConnectParams{MinConnectTimeout: time.Second}

// Ack is one acknowledged call.
type Ack struct {
	Target     string
	DecisionID string
	// At is the decision time of an acknowledged Recommend; zero for an
	// Observe.
	At time.Time
}

// Ledger collects the acknowledged calls of every worker; it is safe for
// concurrent use.
type Ledger struct {
	mu         sync.Mutex
	Recommends []Ack
	Observes   []Ack
	Failed     int // calls that failed (server down or killed): not acknowledged
}

func (l *Ledger) add(list *[]Ack, a Ack) {
	l.mu.Lock()
	defer l.mu.Unlock()
	*list = append(*list, a)
}

func (l *Ledger) fail() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.Failed++
}

// Each worker spreads its calls over targetsPerWorker targets at a time and
// moves on to fresh ones after callsPerTarget calls each, so that no target
// gets more observed events than the store keeps (64), however long the
// run.
const (
	targetsPerWorker = 64
	callsPerTarget   = 32
)

// Work calls Recommend and then Observe(applied) for worker w's targets in
// turn until stop is closed, recording what was acknowledged. Calls that
// fail are retried on the next turn; they were never acknowledged.
func Work(client setpointv1.AutoscalerServiceClient, w int, stop <-chan struct{}, led *Ledger) {
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		target := fmt.Sprintf("w%d-t%d", w, i%targetsPerWorker+targetsPerWorker*(i/(targetsPerWorker*callsPerTarget)))
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		resp, err := client.Recommend(ctx, Recommend(target, 2+i%3, time.Now()))
		if err != nil {
			cancel()
			led.fail()
			time.Sleep(2 * time.Millisecond)
			continue
		}
		d := resp.GetDecision()
		led.add(&led.Recommends, Ack{Target: target, DecisionID: d.GetDecisionId(), At: d.GetDecisionTime().AsTime()})
		_, err = client.Observe(ctx, &setpointv1.ObserveRequest{
			Target: Key(target), DecisionId: d.GetDecisionId(),
			Change: &setpointv1.ObserveRequest_Applied{Applied: &setpointv1.AppliedChange{From: int32(2 + i%3), To: d.GetDesiredReplicas()}},
		})
		cancel()
		if err != nil {
			led.fail()
			continue
		}
		led.add(&led.Observes, Ack{Target: target, DecisionID: d.GetDecisionId()})
	}
}

// Verify reads every target back and checks that each acknowledged
// Recommend left its recommendation (at its decision time) in the history
// and each acknowledged Observe its Applied event. It returns the number of
// acknowledged calls it found and lost. A ledger with no acknowledged
// Recommend fails the test: nothing lost of nothing proves nothing.
func Verify(t *testing.T, client setpointv1.AutoscalerServiceClient, led *Ledger) (found, lost int) {
	t.Helper()
	if len(led.Recommends) == 0 {
		t.Errorf("no Recommend was acknowledged (%d Observe): the check of what was kept would pass on nothing", len(led.Observes))
	}
	type seen struct {
		recs   map[time.Time]bool
		events map[string]bool
	}
	targets := map[string]*seen{}
	read := func(target string) *seen {
		if f, ok := targets[target]; ok {
			return f
		}
		resp, err := client.GetTarget(context.Background(), &setpointv1.GetTargetRequest{Target: Key(target)})
		if err != nil && status.Code(err) != codes.NotFound { // a lost target: everything acknowledged for it is lost
			t.Fatalf("GetTarget %s: %v", target, err)
		}
		f := &seen{recs: map[time.Time]bool{}, events: map[string]bool{}}
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
	for _, a := range led.Recommends {
		if read(a.Target).recs[a.At] {
			found++
		} else {
			lost++
			t.Errorf("acknowledged Recommend of %s at %v (decision %s) is not in the history", a.Target, a.At, a.DecisionID)
		}
	}
	for _, a := range led.Observes {
		if read(a.Target).events[a.DecisionID] {
			found++
		} else {
			lost++
			t.Errorf("acknowledged Observe of %s (decision %s) is not in the events", a.Target, a.DecisionID)
		}
	}
	t.Logf("acked %d (Recommend %d, Observe %d), found %d, lost %d",
		len(led.Recommends)+len(led.Observes), len(led.Recommends), len(led.Observes), found, lost)
	return found, lost
}

// CheckFile runs bbolt's consistency check over the store file; a file
// that does not exist (the server never started) passes.
func CheckFile(t *testing.T, path string) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: 5 * time.Second})
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return
		}
		t.Fatalf("open %s: %v", path, err)
	}
	defer db.Close()
	if err := db.View(func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			t.Errorf("consistency check of %s: %v", path, err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// FreeAddr returns a loopback address with a port free at the time of the
// call; every restart of the server listens on it.
func FreeAddr(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	return lis.Addr().String()
}

// Key is the key of the load's target name.
func Key(name string) *setpointv1.TargetKey {
	return &setpointv1.TargetKey{Cluster: "crash", Namespace: "ns", Name: name}
}

// Recommend is a valid Recommend request for target with n running pods at
// 80% of their cpu request against a 50% target.
func Recommend(target string, n int, now time.Time) *setpointv1.RecommendRequest {
	req := &setpointv1.RecommendRequest{
		Target: Key(target),
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
