package boltstore_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	bolt "go.etcd.io/bbolt"

	"github.com/setpointhq/setpoint/engine"
	"github.com/setpointhq/setpoint/internal/testkit"
	"github.com/setpointhq/setpoint/store"
	"github.com/setpointhq/setpoint/store/boltstore"
	"github.com/setpointhq/setpoint/store/storetest"
	"github.com/setpointhq/setpoint/target"
)

// at is storetest.At: storetest.T0 plus s seconds.
var at = storetest.At

// fullRecord is storetest.FullRecord.
var fullRecord = storetest.FullRecord

// TestFullRecordIsFull keeps fullRecord honest as the types grow.
func TestFullRecordIsFull(t *testing.T) {
	for _, path := range zeroFields(reflect.ValueOf(fullRecord(target.Key{Cluster: "c", Namespace: "n", Name: "x"})), "Record") {
		t.Errorf("fullRecord leaves %s zero: set it so the round trip covers it", path)
	}
}

// zeroFields lists the paths of zero values under v.
func zeroFields(v reflect.Value, path string) []string {
	if v.IsZero() {
		return []string{path}
	}
	var out []string
	switch v.Kind() {
	case reflect.Pointer:
		if v.Type() != reflect.TypeFor[*time.Location]() {
			out = append(out, zeroFields(v.Elem(), path)...)
		}
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			return nil
		}
		for i := range v.NumField() {
			out = append(out, zeroFields(v.Field(i), path+"."+v.Type().Field(i).Name)...)
		}
	case reflect.Slice:
		for i := range v.Len() {
			out = append(out, zeroFields(v.Index(i), fmt.Sprintf("%s[%d]", path, i))...)
		}
	case reflect.Map:
		for _, k := range v.MapKeys() {
			out = append(out, zeroFields(v.MapIndex(k), fmt.Sprintf("%s[%v]", path, k))...)
		}
	}
	return out
}

// put is storetest.Put.
var put = storetest.Put

func TestOpenCreatesCurrentSchema(t *testing.T) {
	path := newPath(t)
	st := open(t, path, boltstore.Options{})
	got, err := st.SchemaVersion()
	if err != nil || got != boltstore.SchemaVersion {
		t.Fatalf("SchemaVersion() = %d, %v; want %d", got, err, boltstore.SchemaVersion)
	}
	if st.Path() != path {
		t.Errorf("Path() = %q, want %q", st.Path(), path)
	}
}

func TestOpenRefusesUnknownLayout(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(tx *bolt.Tx) error
	}{
		{"newer version", setVersion(binary.BigEndian.AppendUint64(nil, boltstore.SchemaVersion+1))},
		{"version 0", setVersion(binary.BigEndian.AppendUint64(nil, 0))},
		{"malformed version", setVersion([]byte{1, 2, 3})},
		{"missing version", func(tx *bolt.Tx) error { return tx.Bucket(boltstore.BucketMeta).Delete(boltstore.KeyMetaSchemaVersion) }},
		{"missing bucket", func(tx *bolt.Tx) error { return tx.DeleteBucket(boltstore.BucketRecords) }},
		{"foreign file", func(tx *bolt.Tx) error {
			if err := tx.DeleteBucket(boltstore.BucketMeta); err != nil {
				return err
			}
			_, err := tx.CreateBucket([]byte("someone-else"))
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := newPath(t)
			st, err := boltstore.Open(path, boltstore.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if err := st.Close(); err != nil {
				t.Fatal(err)
			}
			editFile(t, path, tc.edit)
			st, err = boltstore.Open(path, boltstore.Options{})
			if err == nil {
				st.Close()
				t.Fatal("Open succeeded, want ErrSchemaVersion")
			}
			if !errors.Is(err, store.ErrSchemaVersion) {
				t.Fatalf("Open: %v, want ErrSchemaVersion", err)
			}
			checkFile(t, path)
		})
	}
}

// setVersion returns an edit that stores raw as the schema version.
func setVersion(raw []byte) func(tx *bolt.Tx) error {
	return func(tx *bolt.Tx) error {
		return tx.Bucket(boltstore.BucketMeta).Put(boltstore.KeyMetaSchemaVersion, raw)
	}
}

func TestOpenRejectsNegativeOptions(t *testing.T) {
	for name, opts := range map[string]boltstore.Options{
		"MaxEvents":          {MaxEvents: -1},
		"CheckpointInterval": {CheckpointInterval: -time.Second},
	} {
		if _, err := boltstore.Open(newPath(t), opts); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("Open with a negative %s: %v, want ErrInvalid", name, err)
		}
	}
}

func TestRoundTripFullRecord(t *testing.T) {
	path := newPath(t)
	st := open(t, path, boltstore.Options{})
	key := target.Key{Cluster: "prod-eu", Namespace: "shop", Name: "web"}
	want := fullRecord(key)

	if got := put(t, st, want); !cmp.Equal(got, want) {
		t.Errorf("Update returned a different record (-got +want):\n%s", cmp.Diff(got, want))
	}
	got, err := st.Get(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Get after Update (-want +got):\n%s", diff)
	}

	// The same after a restart.
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st = open(t, path, boltstore.Options{})
	got, err = st.Get(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Get after reopening (-want +got):\n%s", diff)
	}
}

func TestUpdateBounds(t *testing.T) {
	st := open(t, newPath(t), boltstore.Options{MaxEvents: 3, MaxHistory: 3})
	key := target.Key{Cluster: "c", Namespace: "n", Name: "web"}
	var events []target.Event
	for i := range 5 {
		events = append(events, target.Event{Kind: target.EventApplied, From: int32(i), To: int32(i + 1), At: at(i)})
	}
	// The engine overwrites recommendations in place: the list is not in
	// time order, and the newest three must survive in their order.
	recs := []engine.Recommendation{{Replicas: 1, At: at(40)}, {Replicas: 2, At: at(10)}, {Replicas: 3, At: at(50)}, {Replicas: 4, At: at(20)}, {Replicas: 5, At: at(30)}}
	got := put(t, st, target.Record{Key: key, Events: events, History: engine.History{Recommendations: recs}, LastSeen: at(0)})

	want := target.Record{
		Key:      key,
		Events:   events[2:],
		History:  engine.History{Recommendations: []engine.Recommendation{recs[0], recs[2], recs[4]}},
		LastSeen: at(0),
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Update returned (-want +got):\n%s", diff)
	}
	stored, err := st.Get(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, stored); diff != "" {
		t.Errorf("stored (-want +got):\n%s", diff)
	}
}

func TestUpdatePanicIsRaisedInCaller(t *testing.T) {
	st := open(t, newPath(t), boltstore.Options{})
	ctx := context.Background()
	key := target.Key{Cluster: "c", Namespace: "n", Name: "web"}
	func() {
		defer func() {
			if p := recover(); p == nil {
				t.Error("Update did not panic")
			}
		}()
		st.Update(ctx, key, func(*target.Record) error { panic("engine bug") })
	}()
	if _, err := st.Get(ctx, key); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Get after a panicking update: %v, want ErrNotFound", err)
	}
	put(t, st, target.Record{Key: key, LastSeen: at(0)}) // the committer survived
}

// appendRecommendation is an update function adding one recommendation.
func appendRecommendation(replicas int32) func(*target.Record) error {
	return func(r *target.Record) error {
		r.History.Recommendations = append(r.History.Recommendations, engine.Recommendation{Replicas: replicas, At: at(int(replicas))})
		r.LastSeen = at(int(replicas))
		return nil
	}
}

func TestConcurrentUpdatesOfOneKeyLoseNothing(t *testing.T) {
	const callers = 50
	st := open(t, newPath(t), boltstore.Options{})
	ctx := context.Background()
	key := target.Key{Cluster: "c", Namespace: "n", Name: "web"}

	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			if _, err := st.Update(ctx, key, appendRecommendation(int32(i))); err != nil {
				t.Errorf("Update %d: %v", i, err)
			}
		})
	}
	wg.Wait()

	rec, err := st.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	storetest.CheckEachOnce(t, storetest.Replicas(rec), callers)
	if s := st.Stats(); s.Writes != callers || s.Commits > callers {
		t.Errorf("Stats() = %+v, want %d writes in at most as many commits", s, callers)
	}
}

// holdFirstCommit makes st's committer stop before its first commit until
// release is called; entered is closed when it stops there. The first
// commit's batch is the first write alone. Call it before st's first write.
func holdFirstCommit(t *testing.T, st *boltstore.Store) (entered <-chan struct{}, release func()) {
	t.Helper()
	in, held := make(chan struct{}), make(chan struct{})
	var once sync.Once
	first := true
	boltstore.SetBeforeCommitHook(st, func(int) {
		if first {
			first = false
			close(in)
			<-held
		}
	})
	release = func() { once.Do(func() { close(held) }) }
	t.Cleanup(release)
	return in, release
}

// waitQueued waits until n writes are queued behind the committer.
func waitQueued(t *testing.T, st *boltstore.Store, n int) {
	t.Helper()
	testkit.Eventually(t, time.Minute, fmt.Sprintf("%d writes queued", n), func() error {
		if q := boltstore.QueueLen(st); q < n {
			return fmt.Errorf("%d queued", q)
		}
		return nil
	})
}

func TestGroupCommitSharesOneCommit(t *testing.T) {
	const callers = 50
	st := open(t, newPath(t), boltstore.Options{})
	entered, release := holdFirstCommit(t, st)
	ctx := context.Background()
	key := func(i int) target.Key { return target.Key{Cluster: "c", Namespace: "n", Name: fmt.Sprint("web-", i)} }

	var wg sync.WaitGroup
	update := func(i int) {
		wg.Go(func() {
			if _, err := st.Update(ctx, key(i), appendRecommendation(int32(i))); err != nil {
				t.Errorf("Update %d: %v", i, err)
			}
		})
	}
	update(0)
	<-entered // the committer holds the first write
	for i := 1; i < callers; i++ {
		update(i)
	}
	waitQueued(t, st, callers-1)
	release()
	wg.Wait()

	want := boltstore.Stats{Commits: 2, Writes: callers, MaxBatch: callers - 1}
	s := st.Stats()
	if diff := cmp.Diff(want, boltstore.Stats{Commits: s.Commits, Writes: s.Writes, MaxBatch: s.MaxBatch}); diff != "" {
		t.Errorf("Stats() (-want +got):\n%s", diff)
	}
	for i := range callers {
		rec, err := st.Get(ctx, key(i))
		if err != nil {
			t.Fatal(err)
		}
		if n := len(rec.History.Recommendations); n != 1 {
			t.Errorf("%s: %d recommendations kept, want 1", key(i), n)
		}
	}
}

func TestGroupCommitFailsOnlyTheFailingWrite(t *testing.T) {
	st := open(t, newPath(t), boltstore.Options{})
	entered, release := holdFirstCommit(t, st)
	ctx := context.Background()
	a := target.Key{Cluster: "c", Namespace: "n", Name: "a"}
	b := target.Key{Cluster: "c", Namespace: "n", Name: "b"}
	errBoom := errors.New("boom")

	c := target.Key{Cluster: "c", Namespace: "n", Name: "c"}
	d := target.Key{Cluster: "c", Namespace: "n", Name: "d"}
	results := make([]error, 4)
	var wg sync.WaitGroup
	wg.Go(func() { _, results[0] = st.Update(ctx, a, appendRecommendation(1)) })
	<-entered
	// One batch: b and d; c's function fails before anything is queued,
	// and fails c alone.
	queued := 0
	for i, w := range []struct {
		key   target.Key
		fn    func(*target.Record) error
		fails bool
	}{
		{b, appendRecommendation(3), false},
		{c, func(*target.Record) error { return errBoom }, true},
		{d, appendRecommendation(4), false},
	} {
		if w.fails {
			_, results[i+1] = st.Update(ctx, w.key, w.fn)
			continue
		}
		wg.Go(func() { _, results[i+1] = st.Update(ctx, w.key, w.fn) })
		queued++
		waitQueued(t, st, queued)
	}
	release()
	wg.Wait()

	if diff := cmp.Diff([]error{nil, nil, errBoom, nil}, results, cmp.Comparer(func(x, y error) bool { return x == y })); diff != "" {
		t.Errorf("results (-want +got):\n%s", diff)
	}
	rec, err := st.Get(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	want := []engine.Recommendation{{Replicas: 1, At: at(1)}}
	if diff := cmp.Diff(want, rec.History.Recommendations); diff != "" {
		t.Errorf("recommendations of a (-want +got):\n%s", diff)
	}
	if rec, err := st.Get(ctx, d); err != nil || len(rec.History.Recommendations) != 1 {
		t.Errorf("Get(d) = %d recommendations, %v; want 1", len(rec.History.Recommendations), err)
	}
	if _, err := st.Get(ctx, c); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Get of the failed write's key: %v, want ErrNotFound", err)
	}
	if s := st.Stats(); s.Commits != 2 {
		t.Errorf("Stats() = %+v, want 2 commits", s)
	}
}

// TestUpdateCancelledWhileQueuedStoresNothing: an update cancelled while
// queued has run its function (functions run before the write is queued)
// but stores nothing of it.
func TestUpdateCancelledWhileQueuedStoresNothing(t *testing.T) {
	st := open(t, newPath(t), boltstore.Options{})
	entered, release := holdFirstCommit(t, st)
	key := target.Key{Cluster: "c", Namespace: "n", Name: "web"}

	var wg sync.WaitGroup
	wg.Go(func() {
		if _, err := st.Update(context.Background(), key, appendRecommendation(1)); err != nil {
			t.Errorf("Update: %v", err)
		}
	})
	<-entered
	other := target.Key{Cluster: "c", Namespace: "n", Name: "other"}
	ctx, cancel := context.WithCancel(context.Background())
	ran := false
	done := make(chan error)
	go func() {
		_, err := st.Update(ctx, other, func(r *target.Record) error { ran = true; return appendRecommendation(9)(r) })
		done <- err
	}()
	waitQueued(t, st, 1)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled Update: %v, want context.Canceled", err)
	}
	release()
	wg.Wait()
	if _, err := st.Update(context.Background(), key, appendRecommendation(2)); err != nil {
		t.Fatal(err)
	}
	if !ran {
		t.Error("the cancelled update's function did not run before it was queued")
	}
	if _, err := st.Get(context.Background(), other); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Get of the cancelled update's key: %v, want ErrNotFound", err)
	}
	if s := st.Stats(); s.Writes != 2 {
		t.Errorf("Stats() = %+v, want 2 writes", s)
	}
}

func TestUpdateWithDoneContextFailsAtOnce(t *testing.T) {
	st := open(t, newPath(t), boltstore.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := st.Update(ctx, target.Key{Name: "x"}, appendRecommendation(1))
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Update: %v, want context.Canceled", err)
	}
}

func TestCorruptRecordFailsOnlyItsTarget(t *testing.T) {
	path := newPath(t)
	ctx := context.Background()
	good := target.Key{Cluster: "c", Namespace: "n", Name: "good"}
	bad := target.Key{Cluster: "c", Namespace: "n", Name: "bad"}
	st := open(t, path, boltstore.Options{})
	put(t, st, fullRecord(good))
	put(t, st, fullRecord(bad))
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	editFile(t, path, func(tx *bolt.Tx) error {
		k, err := boltstore.RecordKey(bad)
		if err != nil {
			return err
		}
		return tx.Bucket(boltstore.BucketRecords).Put(k, []byte("\x0a\xff\xff\xff\xffnot a protobuf"))
	})
	st = open(t, path, boltstore.Options{})

	isCorruptBad := func(op string, err error) {
		t.Helper()
		var ce *store.CorruptError
		if !errors.Is(err, store.ErrCorrupt) || !errors.As(err, &ce) || ce.Key != bad {
			t.Errorf("%s: %v, want a *CorruptError for %s", op, err, bad)
		}
	}
	_, err := st.Get(ctx, bad)
	isCorruptBad("Get(bad)", err)
	ran := false
	_, err = st.Update(ctx, bad, func(*target.Record) error { ran = true; return nil })
	isCorruptBad("Update(bad)", err)
	if ran {
		t.Error("Update ran fn on a corrupt record")
	}

	if _, err := st.Get(ctx, good); err != nil {
		t.Errorf("Get(good): %v", err)
	}
	if _, err := st.Update(ctx, good, appendRecommendation(9)); err != nil {
		t.Errorf("Update(good): %v", err)
	}
	recs, next, err := st.List(ctx, store.Query{})
	isCorruptBad("List", err)
	if len(recs) != 1 || recs[0].Key != good || next != "" {
		t.Errorf("List = %d records, next %q; want only %s and no next page", len(recs), next, good)
	}

	// Delete clears it; the target starts afresh.
	if err := st.Delete(ctx, bad); err != nil {
		t.Fatalf("Delete(bad): %v", err)
	}
	if _, err := st.Update(ctx, bad, appendRecommendation(1)); err != nil {
		t.Errorf("Update(bad) after Delete: %v", err)
	}
	if n, err := st.Expire(ctx, at(3600)); err != nil || n != 2 {
		t.Errorf("Expire = %d, %v; want both records gone, the index consistent", n, err)
	}
}

func TestReopenKeepsData(t *testing.T) {
	path := newPath(t)
	ctx := context.Background()
	st := open(t, path, boltstore.Options{})
	key := target.Key{Cluster: "c", Namespace: "n", Name: "web"}
	for i := range 3 {
		if _, err := st.Update(ctx, key, appendRecommendation(int32(i))); err != nil {
			t.Fatal(err)
		}
	}
	want, err := st.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st = open(t, path, boltstore.Options{})
	got, err := st.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("after reopening (-want +got):\n%s", diff)
	}
	if n := len(got.History.Recommendations); n != 3 {
		t.Errorf("%d recommendations, want 3", n)
	}
}

func TestClose(t *testing.T) {
	st := open(t, newPath(t), boltstore.Options{})
	ctx := context.Background()
	key := target.Key{Cluster: "c", Namespace: "n", Name: "web"}
	put(t, st, target.Record{Key: key, LastSeen: at(0)})
	if err := st.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for name, call := range map[string]func() error{
		"Update": func() error { _, err := st.Update(ctx, key, appendRecommendation(1)); return err },
		"Get":    func() error { _, err := st.Get(ctx, key); return err },
		"List":   func() error { _, _, err := st.List(ctx, store.Query{}); return err },
		"Delete": func() error { return st.Delete(ctx, key) },
		"Expire": func() error { _, err := st.Expire(ctx, at(0)); return err },
		"Close":  st.Close,
		"SchemaVersion": func() error {
			_, err := st.SchemaVersion()
			return err
		},
	} {
		if err := call(); !errors.Is(err, store.ErrClosed) {
			t.Errorf("%s after Close: %v, want ErrClosed", name, err)
		}
	}
}

func TestCloseWaitsForQueuedWrites(t *testing.T) {
	path := newPath(t)
	st := open(t, path, boltstore.Options{})
	entered, release := holdFirstCommit(t, st)
	ctx := context.Background()
	key := func(i int) target.Key { return target.Key{Cluster: "c", Namespace: "n", Name: fmt.Sprint("web-", i)} }

	var wg sync.WaitGroup
	update := func(i int) {
		wg.Go(func() {
			if _, err := st.Update(ctx, key(i), appendRecommendation(int32(i))); err != nil {
				t.Errorf("Update %d: %v", i, err)
			}
		})
	}
	update(0)
	<-entered
	for i := 1; i < 5; i++ {
		update(i)
	}
	waitQueued(t, st, 4)
	closed := make(chan error)
	go func() { closed <- st.Close() }()
	release()
	if err := <-closed; err != nil {
		t.Fatalf("Close: %v", err)
	}
	wg.Wait()

	st = open(t, path, boltstore.Options{})
	for i := range 5 {
		if _, err := st.Get(ctx, key(i)); err != nil {
			t.Errorf("Get(%s) after Close: %v", key(i), err)
		}
	}
}

// TestContract runs the contract every backend passes on Bolt files.
func TestContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		return open(t, newPath(t), boltstore.Options{})
	})
}

// TestDecide: Decide gives its function of the previous last decision
// only its ID and At, stores what Update stores, and fails, storing
// nothing, when its function keeps the previous last decision.
func TestDecide(t *testing.T) {
	ctx := context.Background()
	key := target.Key{Cluster: "c", Namespace: "n", Name: "web"}
	full := fullRecord(key)
	decide := func(id string, seen *target.LastDecision) func(*target.Record) error {
		return func(r *target.Record) error {
			if r.Last != nil {
				*seen = *r.Last
			}
			r.Last = &target.LastDecision{ID: id, At: r.Last.At.Add(time.Minute), Decision: full.Last.Decision, Before: r.Status, From: 7}
			r.LastSeen = r.Last.At
			return nil
		}
	}
	stored := map[bool]target.Record{}
	for _, decision := range []bool{false, true} {
		st := open(t, newPath(t), boltstore.Options{})
		put(t, st, full)
		write := st.Update
		if decision {
			write = st.Decide
		}
		var seen target.LastDecision
		if _, err := write(ctx, key, decide("d-next", &seen)); err != nil {
			t.Fatal(err)
		}
		want := *full.Last
		if decision {
			want = target.LastDecision{ID: full.Last.ID, At: full.Last.At}
		}
		if diff := cmp.Diff(want, seen); diff != "" {
			t.Errorf("Decide=%v: the function saw as the last decision (-want +got):\n%s", decision, diff)
		}
		rec, err := st.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		stored[decision] = rec

		if decision {
			_, err := st.Decide(ctx, key, func(r *target.Record) error { r.LastSeen = r.LastSeen.Add(time.Hour); return nil })
			if err == nil {
				t.Error("a decision keeping the previous last decision was stored")
			}
			if after, _ := st.Get(ctx, key); !cmp.Equal(after, rec) {
				t.Errorf("a failed decision changed the record (-before +after):\n%s", cmp.Diff(rec, after))
			}
		}
	}
	if diff := cmp.Diff(stored[false], stored[true]); diff != "" {
		t.Errorf("stored (-Update +Decide):\n%s", diff)
	}
}
