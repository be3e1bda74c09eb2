package etcdstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/setpointhq/setpoint/store/storetest"
	"github.com/setpointhq/setpoint/target"
)

// An error fn returns is an answer about the stored record, so it must be
// decided on the record as it is stored, not on a stale copy: here server
// a's cached record is stale (b wrote the target since, with no change for
// the feed, so nothing told a), and fn refuses what it does not see b's
// write in. (The refusal that shows it in the service: Observe(applied) of
// the target's last decision, reported to a server that has not yet heard
// of that decision, is refused as "not a decision this target was given";
// test/ha's TestFaultsUnderLoad and TestConcurrentRecommends find it.)
func TestUpdateFnErrorIsDecidedOnTheStoredRecord(t *testing.T) {
	ctx := context.Background()
	prefix := fmt.Sprintf("/stalefn-%d/", time.Now().UnixNano())
	a := open(t, prefix)
	b := open(t, prefix)
	key := target.Key{Cluster: "c", Namespace: "n", Name: "web"}
	if _, err := a.Update(ctx, key, storetest.DecideFn("d1")); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Update(ctx, key, func(r *target.Record) error { r.Ref.Name = "seen-by-b"; return nil }); err != nil {
		t.Fatal(err)
	}
	errNotSeen := errors.New("b's write is not in the record")
	got, err := a.Update(ctx, key, func(r *target.Record) error {
		if r.Ref.Name != "seen-by-b" {
			return errNotSeen
		}
		r.Ref.Kind = "seen-by-a"
		return nil
	})
	if err != nil {
		t.Fatalf("Update on a record b wrote: %v; fn ran on a copy older than the stored record", err)
	}
	if got.Ref.Name != "seen-by-b" || got.Ref.Kind != "seen-by-a" {
		t.Errorf("ref %+v, want b's name and a's kind", got.Ref)
	}
	// On the current record a refusal stands.
	if _, err := a.Update(ctx, key, func(r *target.Record) error { return errNotSeen }); !errors.Is(err, errNotSeen) {
		t.Errorf("Update refused on the current record: %v, want the refusal", err)
	}
}
