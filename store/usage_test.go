package store_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/setpointhq/setpoint/store"
	"github.com/setpointhq/setpoint/target"
)

func TestUsageCountsEachBucket(t *testing.T) {
	st := open(t, newPath(t), store.Options{})
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
