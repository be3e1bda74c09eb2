package boltstore_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/setpointhq/setpoint/engine"
	"github.com/setpointhq/setpoint/internal/testkit"
	"github.com/setpointhq/setpoint/store"
	"github.com/setpointhq/setpoint/store/boltstore"
	"github.com/setpointhq/setpoint/target"
)

// Every update function is given exactly the record decoding the stored
// value gives — reflect.DeepEqual, so also times' locations and monotonic
// readings, which the engine's arithmetic would see — whether the value
// comes from the journal's overlay or from bbolt.

// checkedUpdate is st.Update of key with fn, failing t unless fn is given
// what Get returns at that moment. Nothing else may write key meanwhile but
// Delete and Expire.
func checkedUpdate(t *testing.T, ctx context.Context, st store.Store, key target.Key, fn func(*target.Record) error) (target.Record, error) {
	t.Helper()
	return checkedWrite(t, ctx, st, st.Update, false, key, fn)
}

// checkedDecide is checkedUpdate with st.Decide: fn is given of the last
// decision only ID and At, as Store.Decide says.
func checkedDecide(t *testing.T, ctx context.Context, st store.Store, key target.Key, fn func(*target.Record) error) (target.Record, error) {
	t.Helper()
	return checkedWrite(t, ctx, st, st.Decide, true, key, fn)
}

// checkedWrite is write (st's Update, or its Decide when decision is set)
// of key with fn, checked as checkedUpdate says.
func checkedWrite(t *testing.T, ctx context.Context, st store.Store, write func(context.Context, target.Key, func(*target.Record) error) (target.Record, error), decision bool, key target.Key, fn func(*target.Record) error) (target.Record, error) {
	t.Helper()
	return write(ctx, key, func(r *target.Record) error {
		want, err := st.Get(context.Background(), key)
		switch {
		case errors.Is(err, store.ErrNotFound):
			want = target.Record{Key: key}
		case err != nil:
			t.Errorf("Get(%s) in the update function: %v", key, err)
		}
		if want.Last != nil && decision {
			want.Last = &target.LastDecision{ID: want.Last.ID, At: want.Last.At}
		}
		if !reflect.DeepEqual(*r, want) {
			t.Errorf("%s: the update function was given a record that is not the stored one (-stored +given):\n%s\n(reflect.DeepEqual: false)", key, cmp.Diff(want, *r))
		}
		return fn(r)
	})
}

// wallClock is now with a monotonic reading and the local location, as a
// server's clock gives it, offset by s seconds.
func wallClock(now time.Time, s int) time.Time { return now.Add(time.Duration(s) * time.Second) }

// cacheDecide records a full decision made at t as a server does, and
// changes the history in place as the engine does.
func cacheDecide(id string, t time.Time) func(*target.Record) error {
	return func(r *target.Record) error {
		full := fullRecord(r.Key)
		if r.LastSeen.IsZero() {
			*r = full
		}
		if n := len(r.History.Recommendations); n > 0 {
			r.History.Recommendations[n-1].At = t // overwritten in place
		}
		r.History.Recommendations = append(r.History.Recommendations, engine.Recommendation{Replicas: int32(len(id)), At: t})
		d := full.Last.Decision
		d.Status.Conditions = append([]engine.Condition(nil), d.Status.Conditions...)
		d.Status.Conditions[0].LastTransitionTime = t
		r.Last = &target.LastDecision{ID: id, At: t, Decision: d, Before: r.Status, From: r.Status.CurrentReplicas}
		r.Status = d.Status
		r.LastSeen = t
		return nil
	}
}

// cacheObserve records an observation as the server's Observe does.
func cacheObserve(kind target.EventKind, t time.Time) func(*target.Record) error {
	return func(r *target.Record) error {
		o := target.Observation{Kind: kind, From: 3, To: 4, Message: "boom"}
		if r.Last != nil {
			o.DecisionID = r.Last.ID
		}
		return target.Observe(r, o, t)
	}
}

// scramble changes every part of r in place that a record shares with
// the slices and maps it was built from.
func scramble(r *target.Record) {
	for i := range r.History.Recommendations {
		r.History.Recommendations[i].Replicas = -1
	}
	for i := range r.Events {
		r.Events[i].Message = "scrambled"
	}
	for i := range r.Status.Conditions {
		r.Status.Conditions[i].Message = "scrambled"
	}
	for i := range r.Spec.Metrics {
		if s := r.Spec.Metrics[i].Metric.Selector; s != nil && s.MatchLabels != nil {
			s.MatchLabels["scrambled"] = "yes"
		}
	}
	if r.Last != nil {
		r.Last.ID = "scrambled"
		for i := range r.Last.Decision.Status.Conditions {
			r.Last.Decision.Status.Conditions[i].Reason = "scrambled"
		}
		for i := range r.Last.Before.Conditions {
			r.Last.Before.Conditions[i].Reason = "scrambled"
		}
	}
}

// TestUpdateIsGivenTheStoredRecord runs decisions, observations and every
// way an update can fail or be retried, across a restart and a deletion:
// each update function is given the stored record.
func TestUpdateIsGivenTheStoredRecord(t *testing.T) {
	now := time.Now()
	keys := []target.Key{{Cluster: "c", Namespace: "n", Name: "a"}, {Cluster: "c", Namespace: "n", Name: "b"}, {Cluster: "c", Namespace: "m", Name: "a"}}
	path := newPath(t)
	st, err := boltstore.Open(path, boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = st.Close() }()
	ctx := context.Background()
	errBoom := errors.New("boom")
	step := 0
	must := func(_ target.Record, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
	}
	for round := range 4 {
		for i, key := range keys {
			step++
			s := round*100 + i*10
			must(checkedDecide(t, ctx, st, key, cacheDecide(fmt.Sprintf("d-%d", step), wallClock(now, s))))
			// The caller's record is its own: changing it changes nothing stored.
			got, err := checkedUpdate(t, ctx, st, key, cacheObserve(target.EventApplied, wallClock(now, s+1)))
			must(got, err)
			scramble(&got)
			// A function that changes its record and fails stores nothing, and
			// leaves nothing behind for the next one.
			if _, err := checkedUpdate(t, ctx, st, key, func(r *target.Record) error { scramble(r); return errBoom }); !errors.Is(err, errBoom) {
				t.Fatalf("step %d: a failing function: %v", step, err)
			}
			// A decision that keeps the last decision is refused.
			if _, err := checkedDecide(t, ctx, st, key, func(r *target.Record) error { scramble(r); return nil }); err == nil {
				t.Fatalf("step %d: a decision keeping the last decision was stored", step)
			}
			must(checkedDecide(t, ctx, st, key, cacheDecide(fmt.Sprintf("d-%d-b", step), wallClock(now, s+2))))
			if _, err := checkedDecide(t, ctx, st, key, func(r *target.Record) error { r.LastSeen = r.LastSeen.Add(time.Second); return nil }); err == nil {
				t.Fatalf("step %d: a decision keeping the last decision was stored", step)
			}
			must(checkedUpdate(t, ctx, st, key, cacheObserve(target.EventFailed, wallClock(now, s+3))))
		}
		switch round {
		case 1: // a restart: the records come from the file
			if err := st.Close(); err != nil {
				t.Fatal(err)
			}
			if st, err = boltstore.Open(path, boltstore.Options{}); err != nil {
				t.Fatal(err)
			}
		case 2: // a deleted record is not given back
			if err := st.Delete(ctx, keys[0]); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, key := range keys[1:] {
		if _, err := st.Get(ctx, key); err != nil {
			t.Fatal(err)
		}
	}
}

// failure is a way for an update to fail.
type failure struct {
	name string
	// fail makes the update after the first one fail, once; wantErr is
	// what that update returns (nil: it succeeds after a conflict).
	fail    func(t *testing.T, st *boltstore.Store) (ctx context.Context, cleanup func())
	wantErr error
	// mayStore: the failed update may have stored its record anyway.
	mayStore bool
}

// TestFailedWriteLeavesNothingBehind: an update that conflicts, is
// cancelled (before or after the committer took its write), or whose
// commit fails changes nothing (or, taken before its cancellation, is
// stored whole), and the next updates are given the stored record.
func TestFailedWriteLeavesNothingBehind(t *testing.T) {
	now := time.Now()
	key := target.Key{Cluster: "c", Namespace: "n", Name: "web"}
	errDisk := errors.New("disk on fire")
	for _, tc := range []failure{
		{
			name: "conflict with a delete",
			fail: func(t *testing.T, st *boltstore.Store) (context.Context, func()) {
				once := sync.Once{}
				boltstore.SetAfterPrepareHook(st, func() {
					once.Do(func() {
						if err := st.Delete(context.Background(), key); err != nil {
							t.Errorf("Delete: %v", err)
						}
					})
				})
				return context.Background(), func() {}
			},
		},
		{
			name: "conflict with an expiry",
			fail: func(t *testing.T, st *boltstore.Store) (context.Context, func()) {
				once := sync.Once{}
				boltstore.SetAfterPrepareHook(st, func() {
					once.Do(func() {
						if n, err := st.Expire(context.Background(), wallClock(now, 3600)); err != nil || n != 1 {
							t.Errorf("Expire = %d, %v; want 1", n, err)
						}
					})
				})
				return context.Background(), func() {}
			},
		},
		{
			name: "cancelled before it is queued",
			fail: func(t *testing.T, st *boltstore.Store) (context.Context, func()) {
				ctx, cancel := context.WithCancel(context.Background())
				boltstore.SetAfterPrepareHook(st, cancel)
				return ctx, func() { boltstore.SetAfterPrepareHook(st, nil) }
			},
			wantErr: context.Canceled,
		},
		{
			// Update returns ctx.Err(), and its write is committed after
			// it returned: the next update reads what it stored.
			name: "cancelled after the committer took it",
			fail: func(t *testing.T, st *boltstore.Store) (context.Context, func()) {
				ctx, cancel := context.WithCancel(context.Background())
				entered, release := make(chan struct{}), make(chan struct{})
				var once sync.Once
				boltstore.SetBeforeCommitHook(st, func(int) {
					once.Do(func() {
						close(entered)
						<-release
					})
				})
				go func() {
					<-entered
					cancel()
				}()
				commits := st.Stats().Commits
				return ctx, func() {
					close(release)
					testkit.Eventually(t, time.Minute, "the taken write committed", func() error {
						if st.Stats().Commits == commits {
							return errors.New("not yet")
						}
						return nil
					})
					boltstore.SetBeforeCommitHook(st, nil)
				}
			},
			wantErr:  context.Canceled,
			mayStore: true,
		},
		{
			name: "failed commit",
			fail: func(t *testing.T, st *boltstore.Store) (context.Context, func()) {
				boltstore.SetFailCommitHook(st, func() error { return errDisk })
				return context.Background(), func() { boltstore.SetFailCommitHook(st, nil) }
			},
			wantErr: errDisk,
		},
	} {
		t.Run(tc.name, func(t *testing.T) { failedWrite(t, boltstore.Options{}, now, key, tc) })
	}
}

// failedWrite runs TestFailedWriteLeavesNothingBehind's steps on a
// store opened with opts, the second update failing as fail makes it, and
// returns the record stored at the end.
func failedWrite(t *testing.T, opts boltstore.Options, now time.Time, key target.Key, f failure) target.Record {
	st := open(t, newPath(t), opts)
	ctx := context.Background()
	if _, err := checkedDecide(t, ctx, st, key, cacheDecide("d-1", wallClock(now, 0))); err != nil {
		t.Fatal(err)
	}
	before, err := st.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	fctx, cleanup := f.fail(t, st)
	_, err = checkedDecide(t, fctx, st, key, func(r *target.Record) error {
		if err := cacheDecide("d-2", wallClock(now, 10))(r); err != nil {
			return err
		}
		scramble(r)
		return nil
	})
	cleanup()
	if !errors.Is(err, f.wantErr) {
		t.Fatalf("the failing update: %v, want %v", err, f.wantErr)
	}
	if f.mayStore {
		if after, err := st.Get(ctx, key); err != nil || after.Last == nil || after.Last.ID != "scrambled" {
			t.Fatalf("the write taken before the cancellation was not stored: %+v, %v", after.Last, err)
		}
	}
	if f.wantErr != nil && !f.mayStore {
		if after, err := st.Get(ctx, key); err != nil || !reflect.DeepEqual(before, after) {
			t.Errorf("a failed update changed the record (%v):\n%s", err, cmp.Diff(before, after))
		}
	}
	for i := range 3 {
		if _, err := checkedUpdate(t, ctx, st, key, cacheDecide(fmt.Sprint("d-next-", i), wallClock(now, 20+i))); err != nil {
			t.Fatal(err)
		}
		if _, err := checkedUpdate(t, context.Background(), st, key, cacheObserve(target.EventExternal, wallClock(now, 20+i))); err != nil {
			t.Fatal(err)
		}
	}
	rec, err := st.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// TestConcurrentUpdatesLoseNothing: callers updating a few keys at once
// (updates of one key serialize, of different keys share commits) each
// get the stored record, and no update is lost.
func TestConcurrentUpdatesLoseNothing(t *testing.T) {
	const callers, updates, keys = 8, 25, 3
	st := open(t, newPath(t), boltstore.Options{})
	ctx := context.Background()
	key := func(i int) target.Key {
		return target.Key{Cluster: "c", Namespace: "n", Name: fmt.Sprint("web-", i%keys)}
	}
	var wg sync.WaitGroup
	for c := range callers {
		wg.Go(func() {
			for i := range updates {
				n := int32(c*updates + i)
				if _, err := checkedUpdate(t, ctx, st, key(c), func(r *target.Record) error {
					if r.LastSeen.IsZero() {
						*r = fullRecord(r.Key)
						r.History.Recommendations = nil
					}
					return appendRecommendation(n)(r)
				}); err != nil {
					t.Errorf("Update: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	for k := range keys {
		rec, err := st.Get(ctx, key(k))
		if err != nil {
			t.Fatal(err)
		}
		var want []int32
		for c := k; c < callers; c += keys {
			for i := range updates {
				want = append(want, int32(c*updates+i))
			}
		}
		got := map[int32]int{}
		for _, r := range rec.History.Recommendations {
			got[r.Replicas]++
		}
		for _, w := range want {
			if got[w] != 1 {
				t.Errorf("%s: recommendation %d kept %d times, want once", key(k), w, got[w])
			}
		}
		if len(rec.History.Recommendations) != len(want) {
			t.Errorf("%s: %d recommendations, want %d", key(k), len(rec.History.Recommendations), len(want))
		}
	}
}

// TestUpdateSharesNothingWithTheFunction: a function may fill its record
// from slices and maps its caller keeps, and the caller may keep and
// change the record Update returns. Changing either in place after Update
// returned changes nothing the next update of the key is given.
func TestUpdateSharesNothingWithTheFunction(t *testing.T) {
	st := open(t, newPath(t), boltstore.Options{})
	ctx := context.Background()
	key := target.Key{Cluster: "c", Namespace: "n", Name: "web"}
	kept := fullRecord(key) // the caller's: the function stores it as it is
	got, err := checkedDecide(t, ctx, st, key, func(r *target.Record) error { *r = kept; return nil })
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []*target.Record{&kept, &got} {
		scramble(r)
		r.Spec.Metrics[0].Target.Milli = -1
		r.Spec.Behavior.ScaleUp.Policies[0].Value = -1
		r.Status.CurrentMetrics[0].Value.Milli = -1
		*r.Status.CurrentMetrics[0].AverageUtilization = -1
		r.History.ScaleUpEvents[0].Change = -1
		x := &r.Last.Decision.Explanation
		x.Metrics[0].Proposal, x.Steps[0].To = -1, -1
	}
	if _, err := checkedDecide(t, ctx, st, key, cacheDecide("d-2", time.Now())); err != nil {
		t.Fatal(err)
	}
}
