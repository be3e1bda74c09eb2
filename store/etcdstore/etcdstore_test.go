package etcdstore_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/setpointhq/setpoint/engine"
	"github.com/setpointhq/setpoint/internal/etcdtest"
	"github.com/setpointhq/setpoint/internal/testkit"
	"github.com/setpointhq/setpoint/store"
	"github.com/setpointhq/setpoint/store/boltstore"
	"github.com/setpointhq/setpoint/store/etcdstore"
	"github.com/setpointhq/setpoint/store/record"
	"github.com/setpointhq/setpoint/store/storetest"
	"github.com/setpointhq/setpoint/target"
)

// cluster is one 3-member etcd cluster shared by the package's tests; each
// store gets its own prefix.
var (
	clusterOnce sync.Once
	endpoints   []string
	fixture     *etcdtest.Cluster
	fixtureDirs []string
	prefixes    atomic.Int64
)

func client(t testing.TB) *clientv3.Client {
	t.Helper()
	clusterOnce.Do(func() {
		// The cluster outlives the test that starts it: it is a package
		// fixture, killed with the test binary (Pdeathsig).
		fixture = etcdtest.Start(&fixtureTB{TB: t}, 3)
		endpoints = fixture.Endpoints
	})
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// fixtureTB keeps a fixture's cleanups from running at the end of the test
// that started it.
type fixtureTB struct{ testing.TB }

func (f *fixtureTB) Cleanup(func()) {}
func (f *fixtureTB) TempDir() string {
	dir, err := os.MkdirTemp("", "etcdtest-")
	if err != nil {
		f.Fatal(err)
	}
	fixtureDirs = append(fixtureDirs, dir)
	return dir
}

// open returns a store on a fresh prefix of the shared cluster.
func open(t *testing.T, prefix string) *etcdstore.Store {
	t.Helper()
	if prefix == "" {
		prefix = fmt.Sprintf("/test-%d-%d/", time.Now().UnixNano(), prefixes.Add(1))
	}
	st, err := etcdstore.New(context.Background(), client(t), etcdstore.Options{
		Prefix: prefix,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func TestContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return open(t, "") })
}

// Two stores on one prefix are two servers: concurrent updates of one
// target from both are all recorded, in one order, and the feed numbers
// them in that order.
func TestConcurrentUpdatesFromTwoServersLoseNothing(t *testing.T) {
	const callers = 40
	prefix := fmt.Sprintf("/two-%d/", time.Now().UnixNano())
	a, b := open(t, prefix), open(t, prefix)
	ctx := context.Background()
	key := target.Key{Cluster: "c", Namespace: "n", Name: "web"}
	var wg sync.WaitGroup
	for i := range callers {
		st := a
		if i%2 == 1 {
			st = b
		}
		wg.Go(func() {
			if _, err := st.Update(ctx, key, func(r *target.Record) error {
				r.History.Recommendations = append(r.History.Recommendations, engine.Recommendation{Replicas: int32(i), At: storetest.At(i)})
				r.Last = &target.LastDecision{ID: fmt.Sprint("d", i), At: storetest.At(i)}
				return nil
			}); err != nil {
				t.Errorf("Update %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	rec, err := b.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	got := storetest.Replicas(rec)
	// The history's order is the commit order; the feed saw the same.
	cs, err := a.Changes(ctx, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var fed []int32
	for i, c := range cs {
		if i > 0 && c.Revision <= cs[i-1].Revision {
			t.Errorf("change %d has revision %d after %d", i, c.Revision, cs[i-1].Revision)
		}
		var n int32
		fmt.Sscanf(c.Decision.ID, "d%d", &n)
		fed = append(fed, n)
	}
	if diff := cmp.Diff(got, fed); diff != "" {
		t.Errorf("feed order differs from the history's (-history +feed):\n%s", diff)
	}
	storetest.CheckEachOnce(t, got, callers)
}

// Changes etcd has compacted away are out of range; those after the
// compaction are still read, and a new prefix's feed starts after it.
func TestFeedOutOfRangeAfterCompaction(t *testing.T) {
	ctx := context.Background()
	st := open(t, "")
	for i := range 4 {
		storetest.Put(t, st, target.Record{Key: target.Key{Cluster: "c", Namespace: "n", Name: fmt.Sprint(i)}, Last: &target.LastDecision{ID: "x"}})
	}
	cs, err := st.Changes(ctx, 0, 10)
	if err != nil || len(cs) != 4 {
		t.Fatalf("Changes(0) = %d, %v; want 4", len(cs), err)
	}
	// Compact up to the third write: the first two are gone.
	third := compactAt(t, st, cs[2].Revision)
	if _, err := st.Changes(ctx, cs[0].Revision, 10); !errorsIs(err, store.ErrOutOfRange) {
		t.Errorf("Changes after a compacted change = %v, want ErrOutOfRange", err)
	}
	if got, err := st.Changes(ctx, cs[1].Revision, 10); err != nil || len(got) != 2 || got[0].Revision != cs[2].Revision {
		t.Errorf("Changes after the last compacted write = %d, %v; want the 2 kept", len(got), err)
	}
	fresh := open(t, "")
	storetest.Put(t, fresh, target.Record{Key: target.Key{Cluster: "c", Namespace: "n", Name: "new"}, Last: &target.LastDecision{ID: "y"}})
	if got, err := fresh.Changes(ctx, 0, 10); err != nil || len(got) != 1 {
		t.Errorf("a new prefix's Changes(0) after compaction at %d = %d, %v; want its 1 change", third, len(got), err)
	}
}

// compactAt compacts the shared cluster up to the etcd revision of the
// write that recorded change rev, and returns that revision.
func compactAt(t *testing.T, st *etcdstore.Store, rev uint64) int64 {
	t.Helper()
	r := etcdstore.EtcdRevision(rev)
	if _, err := client(t).Compact(context.Background(), r, clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
	return r
}

func TestRefusesOversizedRecord(t *testing.T) {
	st := open(t, "")
	key := target.Key{Cluster: "c", Namespace: "n", Name: "big"}
	_, err := st.Update(context.Background(), key, func(r *target.Record) error {
		// Random letters: the codec compresses, so a repeated byte would fit.
		rnd := rand.New(rand.NewPCG(1, 2))
		b := make([]byte, 3*etcdstore.MaxRecordBytes)
		for i := range b {
			b[i] = byte('a' + rnd.IntN(26))
		}
		r.Ref.Name = string(b)
		return nil
	})
	if !errorsIs(err, store.ErrInvalid) {
		t.Fatalf("Update of a record over the budget: %v, want ErrInvalid", err)
	}
}

// A store moves from bbolt to etcd and back, every record read back equal.
func TestCopyBoltToEtcdAndBack(t *testing.T) {
	ctx := context.Background()
	bolt, err := boltstore.Open(t.TempDir()+"/a.db", boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer bolt.Close()
	for i := range 25 {
		storetest.Put(t, bolt, target.Record{Key: target.Key{Cluster: "c", Namespace: "n", Name: fmt.Sprint(i)}, LastSeen: storetest.At(i),
			Last: &target.LastDecision{ID: fmt.Sprint("d", i), At: storetest.At(i)}})
	}
	et := open(t, "")
	if n, err := store.Copy(ctx, et, bolt, store.CopyOptions{}); err != nil || n != 25 {
		t.Fatalf("Copy to etcd = %d, %v", n, err)
	}
	var buf bytes.Buffer
	if _, err := et.Backup(ctx, func(int64) error { return nil }, &buf); err != nil {
		t.Fatal(err)
	}
	path := t.TempDir() + "/b.db"
	if err := writeFile(path, buf.Bytes()); err != nil {
		t.Fatal(err)
	}
	back, err := boltstore.Open(path, boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer back.Close()
	want, _, _ := bolt.List(ctx, store.Query{})
	got, _, _ := back.List(ctx, store.Query{})
	if diff := cmp.Diff(want, got); diff != "" || len(got) != 25 {
		t.Errorf("records after bbolt → etcd → bbolt (-want +got):\n%s", diff)
	}
}

// openB is open for benchmarks.
func openB(b *testing.B) *etcdstore.Store {
	st, err := etcdstore.New(context.Background(), client(b), etcdstore.Options{Prefix: fmt.Sprintf("/bench-%d/", time.Now().UnixNano())})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	return st
}

// TestMain stops the shared cluster after the tests.
func TestMain(m *testing.M) {
	code := m.Run()
	if fixture != nil {
		for i := range fixture.Endpoints {
			fixture.Kill(i)
		}
	}
	for _, d := range fixtureDirs {
		os.RemoveAll(d)
	}
	os.Exit(code)
}

func TestDecisionLog(t *testing.T) {
	ctx := context.Background()
	st := open(t, "")
	key := target.Key{Cluster: "c", Namespace: "n", Name: "web"}
	for i := range 3 {
		if _, err := st.Update(ctx, key, func(r *target.Record) error {
			r.Last = &target.LastDecision{ID: fmt.Sprint("d", i), At: storetest.At(i), Decision: engine.Decision{DesiredReplicas: int32(i + 1)}}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	var got []int32
	q := store.DecisionQuery{PageSize: 2}
	for pages := 0; ; pages++ {
		ds, next, err := st.Decisions(ctx, key, q)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			got = append(got, d.DesiredReplicas)
		}
		if next == "" {
			break
		}
		q.PageToken = next
	}
	if diff := cmp.Diff([]int32{1, 2, 3}, got); diff != "" {
		t.Errorf("logged decisions (-want +got):\n%s", diff)
	}
	if err := st.Delete(ctx, key); err != nil {
		t.Fatal(err)
	}
	if ds, _, err := st.Decisions(ctx, key, store.DecisionQuery{}); err != nil || len(ds) != 0 {
		t.Errorf("Decisions after Delete = %d, %v; want none", len(ds), err)
	}
}

// A server whose cached record is stale (another server wrote it with no
// change for the feed, so nothing told the first) loses one transaction
// to the conflict and keeps the other server's write.
func TestStaleCacheConflictsAndLosesNothing(t *testing.T) {
	ctx := context.Background()
	prefix := fmt.Sprintf("/stale-%d/", time.Now().UnixNano())
	var conflicts atomic.Int64
	cli := client(t)
	a, err := etcdstore.New(ctx, cli, etcdstore.Options{Prefix: prefix, Observe: func(op string, _ time.Duration, conflict bool) {
		if conflict {
			conflicts.Add(1)
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b := open(t, prefix)
	key := target.Key{Cluster: "c", Namespace: "n", Name: "web"}
	if _, err := a.Update(ctx, key, storetest.DecideFn("d1")); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Update(ctx, key, func(r *target.Record) error { r.Ref.Name = "seen-by-b"; return nil }); err != nil {
		t.Fatal(err)
	}
	got, err := a.Update(ctx, key, storetest.DecideFn("d2"))
	if err != nil {
		t.Fatal(err)
	}
	if got.Ref.Name != "seen-by-b" || got.Last.ID != "d2" || got.Status.DesiredReplicas != 2 {
		t.Errorf("after a stale cache: ref %q, last %s, desired %d; want b's ref, d2, 2", got.Ref.Name, got.Last.ID, got.Status.DesiredReplicas)
	}
	if n := conflicts.Load(); n != 1 {
		t.Errorf("%d conflicts, want 1", n)
	}
}

// Two servers updating different targets at once never conflict: each
// transaction compares only its own target's record.
func TestUpdatesOfDifferentTargetsDoNotConflict(t *testing.T) {
	ctx := context.Background()
	prefix := fmt.Sprintf("/disjoint-%d/", time.Now().UnixNano())
	var conflicts, commits atomic.Int64
	observe := func(op string, _ time.Duration, conflict bool) {
		if op == "commit" {
			commits.Add(1)
		}
		if conflict {
			conflicts.Add(1)
		}
	}
	var stores []*etcdstore.Store
	for range 2 {
		st, err := etcdstore.New(ctx, client(t), etcdstore.Options{Prefix: prefix, Observe: observe})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		stores = append(stores, st)
	}
	const targets, rounds = 16, 5
	var wg sync.WaitGroup
	for i := range targets {
		wg.Go(func() {
			key := target.Key{Cluster: "c", Namespace: "n", Name: fmt.Sprint(i)}
			for r := range rounds {
				if _, err := stores[i%2].Update(ctx, key, storetest.DecideFn(fmt.Sprint("d", r))); err != nil {
					t.Errorf("Update %d/%d: %v", i, r, err)
				}
			}
		})
	}
	wg.Wait()
	if n := conflicts.Load(); n != 0 {
		t.Errorf("%d conflicts among %d transactions, want none", n, commits.Load())
	}
	if n := commits.Load(); n > targets*rounds {
		t.Errorf("%d transactions for %d updates, want at most one each", n, targets*rounds)
	}
}

// Writes that wait go together in one transaction: when one's record
// moved (here another server wrote it with no change for the feed, so the
// cache is stale), that one gets the record back and the others are
// committed without it, at one etcd revision, their decisions numbered in
// the feed in the batch's order.
func TestBatchWithAMovedRecordCommitsTheOthers(t *testing.T) {
	ctx := context.Background()
	prefix := fmt.Sprintf("/batch-%d/", time.Now().UnixNano())
	var commits, conflicts atomic.Int64
	a, err := etcdstore.New(ctx, client(t), etcdstore.Options{Prefix: prefix, Observe: func(op string, _ time.Duration, conflict bool) {
		if op == "commit" {
			commits.Add(1)
		}
		if conflict {
			conflicts.Add(1)
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b := open(t, prefix)
	var keys []target.Key
	for i := range 4 {
		key := target.Key{Cluster: "c", Namespace: "n", Name: fmt.Sprint("t", i)}
		keys = append(keys, key)
		if _, err := a.Update(ctx, key, storetest.DecideFn("d1")); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.Update(ctx, keys[1], func(r *target.Record) error { r.Ref.Name = "seen-by-b"; return nil }); err != nil {
		t.Fatal(err)
	}
	from, err := a.Revision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	commits.Store(0)
	moved, err := etcdstore.UpdateTogether(a, keys, storetest.DecideFn("d2"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]target.Key{keys[1]}, moved); diff != "" {
		t.Errorf("moved records (-want +got):\n%s", diff)
	}
	if c, n := commits.Load(), conflicts.Load(); c != 2 || n != 1 {
		t.Errorf("%d transactions, %d conflicts; want 2, 1", c, n)
	}
	for i, key := range keys {
		rec, err := b.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		want := "d2"
		if i == 1 {
			want = "d1"
		}
		if rec.Last.ID != want {
			t.Errorf("%s: last decision %s, want %s", key.Name, rec.Last.ID, want)
		}
	}
	cs, err := b.Changes(ctx, from, 100)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range cs {
		got = append(got, c.Key.Name+" "+c.Decision.ID)
		if etcdstore.EtcdRevision(c.Revision) != etcdstore.EtcdRevision(cs[0].Revision) {
			t.Errorf("change %s at etcd revision %d, the first at %d: want one transaction", c.Key.Name, etcdstore.EtcdRevision(c.Revision), etcdstore.EtcdRevision(cs[0].Revision))
		}
	}
	if diff := cmp.Diff([]string{"t0 d2", "t2 d2", "t3 d2"}, got); diff != "" {
		t.Errorf("the batch's changes (-want +got):\n%s", diff)
	}
}

// Servers sharing a prefix compact etcd's history about once per
// CompactEvery, keeping at least that much: a change stays readable for
// an interval after its write, and is out of range a few intervals later.
func TestCompactEvery(t *testing.T) {
	ctx := context.Background()
	const every = 2 * time.Second
	prefix := fmt.Sprintf("/compact-%d/", time.Now().UnixNano())
	var stores []*etcdstore.Store
	for range 2 {
		st, err := etcdstore.New(ctx, client(t), etcdstore.Options{Prefix: prefix, CompactEvery: every})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		stores = append(stores, st)
	}
	key := target.Key{Cluster: "c", Namespace: "n", Name: "web"}
	written := time.Now()
	for i, st := range stores {
		if _, err := st.Update(ctx, key, storetest.DecideFn(fmt.Sprint("d", i))); err != nil {
			t.Fatal(err)
		}
	}
	if cs, err := stores[0].Changes(ctx, 0, 10); err != nil || len(cs) != 2 {
		t.Fatalf("Changes(0) %v after the writes = %d, %v; want both", time.Since(written), len(cs), err)
	}
	deadline := time.Now().Add(10 * every)
	for {
		_, err := stores[1].Changes(ctx, 0, 10)
		if errorsIs(err, store.ErrOutOfRange) {
			break
		}
		if err != nil || time.Now().After(deadline) {
			t.Fatalf("Changes(0) %v after the writes: %v; want ErrOutOfRange once compacted", time.Since(written), err)
		}
		time.Sleep(every / 4)
	}
	if took := time.Since(written); took < every {
		t.Errorf("compacted %v after the writes, less than the interval %v", took, every)
	}
	// The record itself is current data, never compacted.
	if rec, err := stores[1].Get(ctx, key); err != nil || rec.Last.ID != "d1" {
		t.Errorf("Get after compaction = %+v, %v", rec.Last, err)
	}
}

// The decision log is trimmed once per slice of the retention, not by
// every decision: no decision older than the retention and one slice is
// kept, and every decision within the retention is.
func TestDecisionLogRetention(t *testing.T) {
	ctx := context.Background()
	const retention = time.Minute
	slice := retention / 16
	st, err := etcdstore.New(ctx, client(t), etcdstore.Options{
		Prefix:            fmt.Sprintf("/retention-%d/", time.Now().UnixNano()),
		DecisionRetention: retention,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	key := target.Key{Cluster: "c", Namespace: "n", Name: "web"}
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	trimmed := false
	for i := range 150 {
		now := base.Add(time.Duration(i) * time.Second)
		if _, err := st.Update(ctx, key, func(r *target.Record) error {
			r.Last = &target.LastDecision{ID: fmt.Sprint("d", i), At: now, Decision: engine.Decision{DesiredReplicas: int32(i + 1)}}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		ds, _, err := st.Decisions(ctx, key, store.DecisionQuery{PageSize: store.MaxDecisionsPageSize})
		if err != nil {
			t.Fatal(err)
		}
		if len(ds) == 0 || !ds[len(ds)-1].At.Equal(now) {
			t.Fatalf("at %v: the log does not end with the decision just made: %d entries", now, len(ds))
		}
		if oldest := ds[0].At; oldest.Before(now.Add(-retention - slice)) {
			t.Fatalf("at %v: the log keeps a decision of %v, more than %v old", now, oldest, retention+slice)
		}
		// Every decision within the retention is still there.
		kept, want := 0, min(i, int(retention/time.Second))+1
		for _, d := range ds {
			if !d.At.Before(now.Add(-retention)) {
				kept++
			}
		}
		if kept != want {
			t.Fatalf("at %v: %d decisions within the retention, want %d", now, kept, want)
		}
		if ds[0].At.After(base) {
			trimmed = true
		}
	}
	if !trimmed {
		t.Error("the log was never trimmed")
	}
}

// A decision reaches the feed as a reference to the record written with
// it; read back, by Follow (on the server that wrote it and on another)
// and by Changes, it is the change a feed entry of its own
// (record.EncodeChange) gives,
// for every field of a record.
func TestFeedDecisionFromRecord(t *testing.T) {
	ctx := context.Background()
	prefix := fmt.Sprintf("/from-record-%d/", time.Now().UnixNano())
	st, other := open(t, prefix), open(t, prefix)
	var (
		mu                 sync.Mutex
		followed, otherSaw []store.Change
	)
	stop := st.Follow(func(cs []store.Change) {
		mu.Lock()
		defer mu.Unlock()
		followed = append(followed, cs...)
	})
	defer stop()
	stopOther := other.Follow(func(cs []store.Change) {
		mu.Lock()
		defer mu.Unlock()
		otherSaw = append(otherSaw, cs...)
	})
	defer stopOther()
	key := target.Key{Cluster: "c", Namespace: "n", Name: "full"}
	full := storetest.FullRecord(key)
	shared := full // the decision's status stored once, as the record's
	shared.Last = &target.LastDecision{ID: "shared", At: full.Last.At.Add(time.Second), Decision: full.Last.Decision}
	shared.Last.Decision.Status = full.Status
	var want []store.Change
	for i, w := range []target.Record{full, shared} {
		if _, err := st.Update(ctx, key, func(r *target.Record) error {
			*r = w
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		d := *w.Last
		d.Before, d.Decision.History = engine.Status{}, engine.History{}
		b, err := record.EncodeChange(&store.Change{Key: key, Decision: &d, Created: i == 0})
		if err != nil {
			t.Fatal(err)
		}
		e, err := record.DecodeChange(0, b)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, store.Change{Key: key, Kind: store.ChangeDecision, Decision: e.Decision, Created: e.Created})
	}
	// The full record's events are changes of the first write too.
	ignoreRevision := cmp.Options{cmpopts.IgnoreFields(store.Change{}, "Revision"),
		cmpopts.IgnoreSliceElements(func(c store.Change) bool { return c.Kind == store.ChangeObservation })}
	got, err := st.Changes(ctx, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got, ignoreRevision); diff != "" {
		t.Errorf("Changes (-want +got):\n%s", diff)
	}
	testkit.Eventually(t, 10*time.Second, "the other server follows both writes", func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(otherSaw) < len(followed) {
			return fmt.Errorf("%d changes of %d", len(otherSaw), len(followed))
		}
		return nil
	})
	mu.Lock()
	defer mu.Unlock()
	if diff := cmp.Diff(want, followed, ignoreRevision); diff != "" {
		t.Errorf("followed (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(followed, otherSaw); diff != "" {
		t.Errorf("followed by another server (-writer's +other's):\n%s", diff)
	}
}
