package boltstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/setpointhq/setpoint/store"
	"github.com/setpointhq/setpoint/store/boltstore"
	"github.com/setpointhq/setpoint/target"
)

// TestSyncAgeShowsAHeldSync: SyncAge is 0 on an idle store and, while the
// committer or the checkpointer is held inside its write to disk (as a
// disk that stalls its fsync holds it), the time since that write began,
// growing until it ends.
func TestSyncAgeShowsAHeldSync(t *testing.T) {
	ctx := context.Background()
	st := open(t, newPath(t), boltstore.Options{})
	if age := st.SyncAge(); age != 0 {
		t.Fatalf("SyncAge of an idle store = %v, want 0", age)
	}
	commitEntered, commitHeld := make(chan struct{}, 1), make(chan struct{})
	boltstore.SetBeforeCommitHook(st, func(int) {
		select {
		case commitEntered <- struct{}{}:
			<-commitHeld // the first commit only
		default:
		}
	})
	ckEntered, ckHeld := make(chan struct{}, 1), make(chan struct{})
	boltstore.SetCheckpointHook(st, func() error {
		select {
		case ckEntered <- struct{}{}:
			<-ckHeld
		default:
		}
		return nil
	})
	growing := func(who string) {
		t.Helper()
		a := st.SyncAge()
		time.Sleep(20 * time.Millisecond)
		if b := st.SyncAge(); a <= 0 || b-a < 20*time.Millisecond {
			t.Errorf("SyncAge while the %s is held: %v, then %v 20ms later; want it growing with the wait", who, a, b)
		}
	}

	key := target.Key{Cluster: "c", Namespace: "n", Name: "web"}
	updated := make(chan error, 1)
	go func() { _, err := st.Update(ctx, key, observeFn("d1")); updated <- err }()
	<-commitEntered
	growing("committer")
	close(commitHeld)
	if err := <-updated; err != nil {
		t.Fatal(err)
	}

	// List waits for the checkpointer, which writes the Update to bbolt.
	listed := make(chan error, 1)
	go func() { _, _, err := st.List(ctx, store.Query{}); listed <- err }()
	<-ckEntered
	growing("checkpointer")
	close(ckHeld)
	if err := <-listed; err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if age := st.SyncAge(); age != 0 {
		t.Errorf("SyncAge after Close = %v, want 0", age)
	}
}
