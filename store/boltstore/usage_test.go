package boltstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/setpointhq/setpoint/store/boltstore"
	"github.com/setpointhq/setpoint/target"
)

func TestUsageCountsEachBucket(t *testing.T) {
	st := open(t, newPath(t), boltstore.Options{})
	ctx := context.Background()
	const n = 50
	for i := range n {
		key := target.Key{Cluster: "c", Namespace: "n", Name: fmt.Sprintf("t-%02d", i)}
		if _, err := st.Update(ctx, key, appendRecommendation(int32(i))); err != nil {
			t.Fatal(err)
		}
	}
	u, err := st.Usage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if u.Records.Keys != n || u.LastSeen.Keys != n {
		t.Errorf("Usage() = %+v: want %d records and %d index entries", u, n, n)
	}
	if u.Records.InUse <= 0 || u.Records.InUse > u.Records.Allocated || int64(u.Records.Allocated) > u.FileBytes {
		t.Errorf("Usage() = %+v: want 0 < records in use <= allocated <= file", u)
	}
}

// TestChangeFeedPagesAreFull: revisions only grow, so the change feed's
// pages are filled before they are split (changesFillPercent); at bbolt's
// default fill they would stay about half empty, and every commit would
// write twice the pages its entries need.
func TestChangeFeedPagesAreFull(t *testing.T) {
	st := open(t, newPath(t), boltstore.Options{})
	ctx := context.Background()
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 400 {
		key := target.Key{Cluster: "c", Namespace: "n", Name: fmt.Sprintf("t-%03d", i%40)}
		if _, err := st.Decide(ctx, key, decideAt(at.Add(time.Duration(i)*time.Second), int32(i%7))); err != nil {
			t.Fatal(err)
		}
	}
	u, err := st.Usage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if fill := float64(u.Changes.InUse) / float64(u.Changes.Allocated); u.Changes.Keys != 400 || fill < 0.75 {
		t.Errorf("change feed: %d entries fill %.2f of its %d bytes of pages, want 400 entries and at least 0.75", u.Changes.Keys, fill, u.Changes.Allocated)
	}
}
