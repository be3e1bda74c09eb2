package main

import (
	"context"
	"flag"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	setpointclient "github.com/setpointhq/setpoint/clients/go"
	"go.uber.org/goleak"
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
		{name: "embedded without addr", args: []string{"-embedded", "-addr", ""}},
		{name: "no addr", args: []string{"-addr", ""}, wantErr: "-addr"},
		{name: "zero targets", args: []string{"-targets", "0"}, wantErr: "must be > 0"},
		{name: "zero pods", args: []string{"-pods", "0"}, wantErr: "must be > 0"},
		{name: "more callers than targets", args: []string{"-targets", "10", "-concurrency", "11"}, wantErr: "exceeds -targets"},
		{name: "more clusters than targets", args: []string{"-targets", "2", "-concurrency", "1", "-clusters", "3"}, wantErr: "-clusters 3 exceeds"},
		{name: "zero duration", args: []string{"-duration", "0s"}, wantErr: "-duration"},
		{name: "ratio above 1", args: []string{"-observe-ratio", "1.5"}, wantErr: "-observe-ratio"},
		{name: "ratio NaN", args: []string{"-observe-ratio", "NaN"}, wantErr: "-observe-ratio"},
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

// TestRunEmbedded runs a short load against an embedded server: it
// completes with decisions, no failed call and every decision made.
func TestRunEmbedded(t *testing.T) {
	cfg := defaults(t, "-embedded", "-targets", "20", "-clusters", "2", "-concurrency", "2", "-duration", "1s")
	res, err := run(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.Decisions == 0 || res.Observes == 0 || len(res.Recommend) != res.Decisions {
		t.Errorf("decisions %d, observes %d, recommend samples %d: want > 0 and one sample per decision",
			res.Decisions, res.Observes, len(res.Recommend))
	}
	if len(res.Errors) != 0 || res.Undecided != 0 {
		t.Errorf("errors %v, undecided %d: want none", res.Errors, res.Undecided)
	}
	if res.Store == nil || res.Store.Commits == 0 || res.RSS.Peak == 0 {
		t.Errorf("store %+v, RSS %+v: want the embedded server's figures", res.Store, res.RSS)
	}
	md := res.Markdown(cfg)
	for _, want := range []string{"decisions/s", "| Recommend |", "Errors: none.", "GOMAXPROCS"} {
		if !strings.Contains(md, want) {
			t.Errorf("Markdown() lacks %q:\n%s", want, md)
		}
	}
}

// TestRequestDecides checks that a generated request is decided on both
// of its metrics, and that its load changes over time.
func TestRequestDecides(t *testing.T) {
	e, err := startEmbedded()
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := e.stop(); err != nil {
			t.Error(err)
		}
	}()
	c, err := setpointclient.Dial(e.addr, setpointclient.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cfg := defaults(t)
	now := time.Now()
	tg := newTarget(4, cfg, now)
	resp, err := c.Recommend(context.Background(), tg.request(now, rand.New(rand.NewPCG(1, 2))))
	if err != nil {
		t.Fatal(err)
	}
	ex := resp.GetDecision().GetExplanation()
	if len(ex.GetMetrics()) != 2 {
		t.Fatalf("explanation has %d metrics, want 2: %v", len(ex.GetMetrics()), ex)
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
