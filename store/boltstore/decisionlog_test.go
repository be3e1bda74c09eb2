package boltstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/setpointhq/setpoint/engine"
	"github.com/setpointhq/setpoint/store"
	"github.com/setpointhq/setpoint/store/boltstore"
	"github.com/setpointhq/setpoint/target"
)

// decideAt returns an Update function recording a decision made at t with
// desired replicas want.
func decideAt(t time.Time, want int32) func(*target.Record) error {
	return func(rec *target.Record) error {
		rec.Last = &target.LastDecision{ID: fmt.Sprintf("d-%d", t.UnixNano()), At: t, Decision: loggedDecision(t, want).decision()}
		rec.LastSeen = t
		return nil
	}
}

// loggedEntry is what the log keeps of a decision made by decideAt.
type loggedEntry target.LoggedDecision

func (e loggedEntry) decision() engine.Decision {
	return engine.Decision{DesiredReplicas: e.DesiredReplicas, Rescale: e.Rescale, Error: e.Error, Explanation: e.Explanation}
}

func loggedDecision(t time.Time, want int32) loggedEntry {
	return loggedEntry{
		At: t, DesiredReplicas: want, Rescale: want != 3,
		Explanation: engine.Explanation{
			CurrentReplicas: 3, Winner: 1, Proposal: want + 1,
			Metrics: []engine.MetricExplanation{
				{Outcome: engine.OutcomeWithinTolerance, Proposal: 3, Current: 81, Target: 80, ReadyPods: 3},
				{Outcome: engine.OutcomeRebalanced, Proposal: want + 1, Current: 1500, Target: 1000, ReadyPods: 2, UnreadyPods: 1, MissingPods: 1, IgnoredPods: 1},
				{Outcome: "SomethingNew", Err: "metrics API down"},
			},
			Steps: []engine.Step{
				{Kind: engine.StepStabilized, From: want + 1, To: want, Reason: "ScaleDownStabilized"},
				{Kind: "Unheard", From: want, To: want, Reason: "NoSuchReason"},
			},
		},
	}
}

func TestDecisionLog(t *testing.T) {
	ctx := context.Background()
	st := open(t, newPath(t), boltstore.Options{DecisionRetention: 10 * time.Minute})
	key, other := target.Key{Cluster: "c", Namespace: "ns", Name: "web"}, target.Key{Cluster: "c", Namespace: "ns", Name: "web2"}
	var want []target.LoggedDecision
	for i := range 60 { // every 15 s for 15 minutes: the first 19 leave the 10-minute window counted back from the last
		t1 := at(15 * i)
		if _, err := st.Update(ctx, key, decideAt(t1, int32(3+i%4))); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Update(ctx, other, decideAt(t1, 9)); err != nil {
			t.Fatal(err)
		}
		if i >= 19 {
			want = append(want, target.LoggedDecision(loggedDecision(t1, int32(3+i%4))))
		}
	}
	// An observation is no decision: it adds nothing to the log.
	if _, err := st.Update(ctx, key, func(rec *target.Record) error {
		rec.Events = append(rec.Events, target.Event{Kind: target.EventApplied, At: at(900), From: 3, To: 4})
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name     string
		q        store.DecisionQuery
		want     []target.LoggedDecision
		pageSize int
	}{
		{name: "all", want: want},
		{name: "from", q: store.DecisionQuery{From: at(15 * 50)}, want: want[31:]},
		{name: "to excludes its instant", q: store.DecisionQuery{To: at(15 * 30)}, want: want[:11]},
		{name: "range", q: store.DecisionQuery{From: at(15 * 25), To: at(15*27 + 1)}, want: want[6:9]},
		{name: "paged", q: store.DecisionQuery{PageSize: 7}, want: want},
		{name: "paged range", q: store.DecisionQuery{From: at(15 * 21), To: at(15 * 40), PageSize: 4}, want: want[2:21]},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []target.LoggedDecision
			q := tc.q
			for pages := 0; ; pages++ {
				page, next, err := st.Decisions(ctx, key, q)
				if err != nil {
					t.Fatal(err)
				}
				if q.PageSize > 0 && len(page) > q.PageSize {
					t.Fatalf("page of %d decisions, page size %d", len(page), q.PageSize)
				}
				got = append(got, page...)
				if next == "" {
					break
				}
				if pages > 100 {
					t.Fatal("paging does not end")
				}
				q.PageToken = next
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("decisions (-want +got):\n%s", diff)
			}
		})
	}

	if err := st.Delete(ctx, key); err != nil {
		t.Fatal(err)
	}
	if got, _, err := st.Decisions(ctx, key, store.DecisionQuery{}); err != nil || len(got) != 0 {
		t.Errorf("after Delete: %d decisions, %v; want none", len(got), err)
	}
	if got, _, err := st.Decisions(ctx, other, store.DecisionQuery{}); err != nil || len(got) != 41 {
		t.Errorf("the other target after Delete: %d decisions, %v; want 41", len(got), err)
	}
	if n, err := st.Expire(ctx, at(100000)); err != nil || n != 1 {
		t.Fatalf("Expire: %d, %v", n, err)
	}
	if got, _, err := st.Decisions(ctx, other, store.DecisionQuery{}); err != nil || len(got) != 0 {
		t.Errorf("after Expire: %d decisions, %v; want none", len(got), err)
	}
}

func TestDecisionLogDisabledAndBadQueries(t *testing.T) {
	ctx := context.Background()
	st := open(t, newPath(t), boltstore.Options{DecisionRetention: -1})
	key := target.Key{Cluster: "c", Namespace: "ns", Name: "web"}
	if _, err := st.Update(ctx, key, decideAt(at(0), 4)); err != nil {
		t.Fatal(err)
	}
	if got, _, err := st.Decisions(ctx, key, store.DecisionQuery{}); err != nil || len(got) != 0 {
		t.Errorf("negative retention: %d decisions, %v; want none", len(got), err)
	}
	for _, q := range []store.DecisionQuery{{PageSize: -1}, {PageToken: "not a token"}, {PageToken: "AAAA"}} {
		if _, _, err := st.Decisions(ctx, key, q); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("Decisions(%+v) = %v, want ErrInvalid", q, err)
		}
	}
}

// BenchmarkUpdateWithDecisionLog is one decision's Update with and without
// the decision log, at a full log (720 entries).
func BenchmarkUpdateWithDecisionLog(b *testing.B) {
	for _, retention := range []time.Duration{-1, 3 * time.Hour} {
		b.Run(fmt.Sprintf("retention=%v", retention), func(b *testing.B) {
			ctx := context.Background()
			st := open(b, newPath(b), boltstore.Options{DecisionRetention: retention})
			key := target.Key{Cluster: "c", Namespace: "ns", Name: "web"}
			i := 0
			for ; i < 720; i++ {
				if _, err := st.Update(ctx, key, decideAt(at(15*i), 4)); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for b.Loop() {
				if _, err := st.Update(ctx, key, decideAt(at(15*i), 4)); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}
