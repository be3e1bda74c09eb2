package main

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/setpointhq/setpoint/internal/kubetest"
)

// TestRunEtcd runs a tiny workload bounded by its request count against
// the bbolt server, a server on a 3-member etcd cluster the bench
// launches, raw etcd transactions on that cluster, and the baseline, and
// checks the etcd phases' figures and the etcd/bbolt and etcd/raw ratios.
func TestRunEtcd(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	bin, err := kubetest.EtcdBinary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cfg := defaults(t, "-targets", "8", "-clusters", "2", "-concurrency", "2", "-duration", "1m",
		"-requests", "20", "-rounds", "2", "-observe-ratio", "0.5", "-baseline", "-etcd", "-etcd-binary", bin, "-etcd-no-fsync")
	rep, err := run(ctx, cfg, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Phases) != 4 || rep.Phases[0].Name != phaseReal || rep.Phases[1].Name != phaseEtcd || rep.Phases[2].Name != phaseEtcdRaw || rep.Phases[3].Name != phaseBaseline {
		t.Fatalf("phases %v: want setpoint, etcd, etcd-raw, baseline", rep.Phases)
	}
	e := rep.Phases[1]
	if e.Decisions != 2*20 || e.ErrorCount != 0 || e.Undecided != 0 || e.Observes == 0 {
		t.Errorf("etcd: %d decisions, %d errors, %d undecided, %d observes; want 40, none, none, some", e.Decisions, e.ErrorCount, e.Undecided, e.Observes)
	}
	// Every successful call's write is in one transaction, which the 2
	// callers may share; a call reads first only when its target is not
	// cached, and the 2 callers never share one.
	calls := uint64(e.Decisions + e.Observes)
	if f := e.Etcd; f == nil || f.Commits > calls || 2*f.Commits < calls || f.Conflicts != 0 || f.Reads > 8 || f.CommitMs <= 0 || e.EtcdCPUPerCall <= 0 || f.WALBytesPerCall < 3*100 {
		t.Errorf("etcd figures %+v, members' cpu %v µs per call: want a transaction per one or two calls, no conflict, at most one read per target, a record in every member's log", f, e.EtcdCPUPerCall)
	}
	// The raw phases: one read and one transaction per write, each
	// writing a value of a record's size to every member's log.
	raw := rep.Phases[2]
	if f := raw.Etcd; f.ValueBytes < 100 || raw.Decisions != 2*20 || raw.ErrorCount != 0 || f.Reads != 2*20 || f.Commits != 2*20 || f.Conflicts != 0 ||
		f.RequestsPerDecision != 2 || f.WALBytesPerCall < float64(3*f.ValueBytes) || f.CommitMs <= 0 || raw.EtcdCPUPerCall <= 0 {
		t.Errorf("raw etcd: %d writes, %d errors, figures %+v, members' cpu %v µs per write: want 40 writes of a read and a transaction each, no conflict, a record's size in every member's log",
			raw.Decisions, raw.ErrorCount, f, raw.EtcdCPUPerCall)
	}
	if rep.EtcdRatio <= 0 || rep.Ratio <= 0 || rep.EtcdRawRatio <= 0 {
		t.Errorf("ratios etcd/bbolt %v, real/baseline %v, etcd/raw %v: want > 0", rep.EtcdRatio, rep.Ratio, rep.EtcdRawRatio)
	}
	table := rep.Table()
	for _, want := range []string{"etcd      Recommend", "etcd-raw  read+CAS", "etcd/bbolt Recommend throughput", "etcd/raw etcd", "3-member etcd cluster on loopback (fsync off)"} {
		if !strings.Contains(table, want) {
			t.Errorf("Table() lacks %q:\n%s", want, table)
		}
	}
}

// TestStartEtcdServerReportsWhatFailed: a cluster that cannot start (no
// etcd binary where it was told to look) is an error that names what is
// missing, not a panic in the cleanup.
func TestStartEtcdServerReportsWhatFailed(t *testing.T) {
	cfg := defaults(t, "-etcd", "-etcd-binary", "/nonexistent/etcd")
	e, err := startEtcdServer(t.Context(), cfg, func(string, ...any) {})
	if err == nil {
		e.stop()
		t.Fatal("started a cluster from /nonexistent/etcd")
	}
	if e != nil {
		t.Errorf("got a server %v with the error", e)
	}
	if !strings.Contains(err.Error(), "cannot start a 3-member etcd cluster from /nonexistent/etcd") {
		t.Errorf("error %q: want it to say which cluster could not start from what", err)
	}
}
