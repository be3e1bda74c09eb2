// Package storetest is the contract every store.Store backend passes: the
// tests of store/boltstore run it on bbolt files, those of store/etcdstore
// on etcd, with the same assertions; and the records and helpers those
// tests share.
package storetest

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/setpointhq/setpoint/store"
	"github.com/setpointhq/setpoint/target"
)

// Opener returns a new, empty store with its backend's defaults; it closes
// the store at the test's cleanup.
type Opener func(t *testing.T) store.Store

// Run runs the contract tests, each on stores from open.
func Run(t *testing.T, open Opener) {
	for _, tc := range []struct {
		name string
		test func(*testing.T, Opener)
	}{
		{"Update", update},
		{"Decide", decide},
		{"Delete", deleteTarget},
		{"Bounds", bounds},
		{"List", listTargets},
		{"ListRejectsBadQueries", listRejectsBadQueries},
		{"Expire", expire("Expire")},
		{"ExpireAcrossHours", expire("ExpireAcrossHours")},
		{"FeedCountsTargets", feedCountsTargets},
		{"FeedResumes", feedResumes},
		{"Expect", expectWrites},
		{"DecisionLog", decisionLog},
		{"HealthyUntilClosed", healthyUntilClosed},
		{"Backup", backup},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.test(t, open) })
	}
}

// T0 is the time the contract's records are stamped around.
var T0 = time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC)

// At is T0 plus s seconds.
func At(s int) time.Time { return T0.Add(time.Duration(s) * time.Second) }

// Put stores rec as it is and returns what the store returned.
func Put(t testing.TB, st store.Store, rec target.Record) target.Record {
	t.Helper()
	got, err := st.Update(context.Background(), rec.Key, func(r *target.Record) error {
		*r = rec
		return nil
	})
	if err != nil {
		t.Fatalf("Update(%s): %v", rec.Key, err)
	}
	return got
}

// DecideFn records a decision with id, as the server's Recommend does.
func DecideFn(id string) func(*target.Record) error {
	return func(rec *target.Record) error {
		rec.Last = &target.LastDecision{ID: id, At: At(0)}
		rec.Status.DesiredReplicas++
		rec.LastSeen = At(0)
		return nil
	}
}

// Replicas lists the replicas of rec's recommendations, in their order.
func Replicas(rec target.Record) []int32 {
	var out []int32
	for _, r := range rec.History.Recommendations {
		out = append(out, r.Replicas)
	}
	return out
}

// CheckEachOnce fails t unless got holds each of 0…n-1 exactly once, in
// any order: every one of n concurrent updates was kept.
func CheckEachOnce(t testing.TB, got []int32, n int) {
	t.Helper()
	got = slices.Sorted(slices.Values(got))
	want := make([]int32, n)
	for i := range want {
		want[i] = int32(i)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("recommendations kept (-want +got):\n%s", diff)
	}
}
