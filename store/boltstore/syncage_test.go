package boltstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/setpointhq/setpoint/internal/testkit"
	"github.com/setpointhq/setpoint/store"
	"github.com/setpointhq/setpoint/store/boltstore"
	"github.com/setpointhq/setpoint/target"
)

// TestSyncAgeShowsAHeldSync: SyncAge is 0 on an idle store and, while the
// committer or the checkpointer is held inside its write to disk (as a
// disk that stalls its fsync holds it), the time since that write began,
// growing until it ends, and 0 again once it has ended.
func TestSyncAgeShowsAHeldSync(t *testing.T) {
	ctx := context.Background()
	// The checkpointer starts only when List waits for it, not on its
	// own timer: a checkpoint begun before List would be held by the hook
	// while the committer's clock is still set.
	st := open(t, newPath(t), boltstore.Options{CheckpointInterval: time.Hour})
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
	// The committer's batch goes on after its writer has the answer (the
	// journal's segments, which may sync the directory): the checkpointer
	// is measured once it is over, or SyncAge would still be the older
	// commit's age and then drop to the checkpoint's.
	testkit.Eventually(t, 10*time.Second, "SyncAge 0 after the commit", func() error {
		if age := st.SyncAge(); age != 0 {
			return fmt.Errorf("SyncAge = %v", age)
		}
		return nil
	})

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
