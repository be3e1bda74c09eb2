package main

import (
	"context"
	"encoding/json"
	"flag"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"github.com/setpointhq/setpoint/server"
	"github.com/setpointhq/setpoint/store/boltstore"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// defaults returns the configuration of the flags' defaults and args.
func defaults(t *testing.T, args ...string) Config {
	t.Helper()
	var c Config
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	c.RegisterFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return c
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr string // substring; empty: valid
	}{
		{name: "defaults"},
		{name: "loopback addr", args: []string{"-addr", "127.0.0.1:7443"}},
		{name: "localhost addr", args: []string{"-addr", "localhost:7443"}},
		{name: "remote addr", args: []string{"-addr", "10.0.0.1:7443"}, wantErr: "loopback"},
		{name: "zero targets", args: []string{"-targets", "0"}, wantErr: "must be > 0"},
		{name: "zero metrics", args: []string{"-metrics", "0"}, wantErr: "must be > 0"},
		{name: "more callers than targets", args: []string{"-targets", "10", "-concurrency", "11"}, wantErr: "exceeds -targets"},
		{name: "more clusters than targets", args: []string{"-targets", "2", "-concurrency", "1", "-clusters", "3"}, wantErr: "-clusters 3 exceeds"},
		{name: "zero duration", args: []string{"-duration", "0s"}, wantErr: "-duration"},
		{name: "unbounded duration", args: []string{"-duration", "11m"}, wantErr: "-duration"},
		{name: "negative requests", args: []string{"-requests", "-1"}, wantErr: "-requests"},
		{name: "fill with addr", args: []string{"-fill", "10", "-addr", "127.0.0.1:1"}, wantErr: "-fill"},
		{name: "ratio NaN", args: []string{"-observe-ratio", "NaN"}, wantErr: "-observe-ratio"},
		{name: "etcd", args: []string{"-etcd", "-etcd-no-fsync", "-etcd-members", "1"}},
		{name: "etcd endpoints", args: []string{"-etcd", "-etcd-endpoints", "http://127.0.0.1:2379"}},
		{name: "etcd with addr", args: []string{"-etcd", "-addr", "127.0.0.1:1"}, wantErr: "-etcd compares"},
		{name: "etcd with fill", args: []string{"-etcd", "-fill", "10"}, wantErr: "-etcd compares"},
		{name: "etcd flags without etcd", args: []string{"-etcd-endpoints", "http://127.0.0.1:2379"}, wantErr: "need -etcd"},
		{name: "zero etcd members", args: []string{"-etcd", "-etcd-members", "0"}, wantErr: "-etcd-members"},
		{name: "record the etcd phase", args: []string{"-etcd", "-record-phase", "etcd", "-cpuprofile", "x"}},
		{name: "record the etcd phase without etcd", args: []string{"-record-phase", "etcd"}, wantErr: "-record-phase"},
		{name: "record another phase", args: []string{"-record-phase", "baseline"}, wantErr: "-record-phase"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := defaults(t, tt.args...)
			err := c.Validate()
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("Validate() = %v, want nil", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("Validate() = %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}

// TestRunBaseline runs a tiny workload bounded by its request count
// against the in-process server and the baseline, and checks the report's
// shape: both phases, every call counted, a ratio, and the JSON and table
// forms.
func TestRunBaseline(t *testing.T) {
	cfg := defaults(t, "-targets", "8", "-clusters", "2", "-concurrency", "2", "-duration", "1m",
		"-requests", "30", "-rounds", "2", "-observe-ratio", "0.5", "-metrics", "3", "-baseline")
	rep, err := run(t.Context(), cfg, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Phases) != 2 || rep.Phases[0].Name != phaseReal || rep.Phases[1].Name != phaseBaseline {
		t.Fatalf("phases %v: want setpoint then baseline", rep.Phases)
	}
	for _, p := range rep.Phases {
		if p.Decisions != 2*30 || p.Recommend.Count != p.Decisions || p.ErrorCount != 0 {
			t.Errorf("%s: %d decisions, %d samples, %d errors: want 60 (30 per round), one sample each, none failed",
				p.Name, p.Decisions, p.Recommend.Count, p.ErrorCount)
		}
		if p.Observes == 0 || p.Throughput <= 0 || p.Recommend.P50 <= 0 || p.Recommend.P50 > p.Recommend.P99 || p.Recommend.P99 > p.Recommend.Max {
			t.Errorf("%s: observes %d, throughput %v, latency %+v: want positive, ordered figures", p.Name, p.Observes, p.Throughput, p.Recommend)
		}
	}
	if real := rep.Phases[0]; real.Undecided != 0 || real.Store == nil || real.Store.Commits == 0 || real.Store.Writes < 60 {
		t.Errorf("setpoint: undecided %d, store %+v: want every decision made and its writes counted", real.Undecided, real.Store)
	}
	if rep.Ratio <= 0 {
		t.Errorf("ratio %v: want > 0", rep.Ratio)
	}
	data, err := rep.JSONBytes()
	if err != nil {
		t.Fatal(err)
	}
	var generic map[string]any
	if err := json.Unmarshal(data, &generic); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"command", "machine", "phases", "throughput_ratio"} {
		if _, ok := generic[k]; !ok {
			t.Errorf("JSON lacks %q:\n%s", k, data)
		}
	}
	table := rep.Table()
	for _, want := range []string{"setpoint  Recommend", "baseline  Recommend", "p99 ms", "real/baseline", "GOMAXPROCS"} {
		if !strings.Contains(table, want) {
			t.Errorf("Table() lacks %q:\n%s", want, table)
		}
	}
}

// flaky answers every other Recommend with Unavailable.
type flaky struct {
	setpointv1.UnimplementedAutoscalerServiceServer
	n atomic.Int64
}

func (f *flaky) Recommend(context.Context, *setpointv1.RecommendRequest) (*setpointv1.RecommendResponse, error) {
	if f.n.Add(1)%2 == 0 {
		return nil, status.Error(codes.Unavailable, "try later")
	}
	return &setpointv1.RecommendResponse{Decision: &setpointv1.Decision{DesiredReplicas: 3}}, nil
}

// TestRunPhaseCountsErrors checks that failed calls are counted by method
// and code, and not as latency samples.
func TestRunPhaseCountsErrors(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	setpointv1.RegisterAutoscalerServiceServer(srv, &flaky{})
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()
	cfg := defaults(t, "-targets", "4", "-clusters", "1", "-concurrency", "1", "-duration", "1m", "-requests", "20")
	conns, err := dialAll(lis.Addr().String(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer closeAll(conns)
	targets := []*target{newTarget(0, cfg, time.Now()), newTarget(1, cfg, time.Now())}
	res := newPhaseResult(phaseReal)
	res.merge(runPhase(t.Context(), cfg, conns, targets))
	res.finish()
	if res.Decisions != 10 || res.Recommend.Count != 10 || res.ErrorCount != 10 || res.Errors["Recommend Unavailable"] != 10 {
		t.Errorf("decisions %d, samples %d, errors %v: want 10 answered and 10 Unavailable", res.Decisions, res.Recommend.Count, res.Errors)
	}
	rep := &Report{Phases: []*PhaseResult{res}}
	if table := rep.Table(); !strings.Contains(table, "Recommend Unavailable × 10") {
		t.Errorf("Table() does not list the errors:\n%s", table)
	}
}

// TestScaleSmoke runs scale mode at a small size: the store is filled,
// reopened and served, and the figures are reported.
func TestScaleSmoke(t *testing.T) {
	cfg := defaults(t, "-fill", "300", "-targets", "4", "-concurrency", "2", "-duration", "1m", "-requests", "20", "-dir", t.TempDir())
	rep, err := run(t.Context(), cfg, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	s := rep.Scale
	if s == nil {
		t.Fatal("no scale figures")
	}
	if s.Targets != 300 || s.HistoryEntriesPerTarget == 0 || s.FileBytes == 0 || s.ServingSeconds <= 0 || s.BytesPerHistoryEntry <= 0 {
		t.Errorf("scale %+v: want the fill's figures", s)
	}
	if p := rep.Phases[0]; p.Decisions != 20 || p.ErrorCount != 0 {
		t.Errorf("decisions %d, errors %v: want 20 answered over the filled store", p.Decisions, p.Errors)
	}
	if !strings.Contains(rep.Table(), "bytes per history entry") {
		t.Errorf("Table() lacks the scale figures:\n%s", rep.Table())
	}
}

// TestRequestDecides checks that a generated request is decided on each
// of its metrics, and that its load changes over time.
func TestRequestDecides(t *testing.T) {
	e, err := startEmbedded("", server.Options{}, boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := e.stop(); err != nil {
			t.Error(err)
		}
	}()
	cfg := defaults(t, "-metrics", "3")
	conns, err := dialAll(e.Addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer closeAll(conns)
	now := time.Now()
	tg := newTarget(4, cfg, now)
	resp, err := setpointv1.NewAutoscalerServiceClient(conns[0]).Recommend(t.Context(), tg.request(now, rand.New(rand.NewPCG(1, 2))))
	if err != nil {
		t.Fatal(err)
	}
	ex := resp.GetDecision().GetExplanation()
	if len(ex.GetMetrics()) != 3 {
		t.Fatalf("explanation has %d metrics, want 3: %v", len(ex.GetMetrics()), ex)
	}
	for _, m := range ex.GetMetrics() {
		if m.GetError() != "" || m.GetProposal() == 0 {
			t.Errorf("metric %s: error %q, proposal %d: want a proposal", m.GetName(), m.GetError(), m.GetProposal())
		}
	}
	if lo, hi := tg.load(now), tg.load(now.Add(wavePeriod/2)); lo == hi {
		t.Errorf("load %v at now and half a period later: want it to change", lo)
	}
}
