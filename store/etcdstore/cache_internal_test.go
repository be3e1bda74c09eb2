package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/setpointhq/setpoint/proto/setpoint/storage/v1"
	"github.com/setpointhq/setpoint/store"
	"github.com/setpointhq/setpoint/store/record"
	"github.com/setpointhq/setpoint/target"
)

func TestRecordCache(t *testing.T) {
	k := func(n string) target.Key { return target.Key{Cluster: "c", Namespace: "n", Name: n} }
	val := make([]byte, 10)
	for _, tc := range []struct {
		name string
		max  int
		do   func(c *recordCache)
		want map[string]int64 // name → mod cached
	}{
		{"kept", 800, func(c *recordCache) { c.put(k("a"), 5, val) }, map[string]int64{"a": 5}},
		{"disabled", -1, func(c *recordCache) { c.put(k("a"), 5, val) }, map[string]int64{}},
		{"older write ignored", 800, func(c *recordCache) { c.put(k("a"), 5, val); c.put(k("a"), 4, val) }, map[string]int64{"a": 5}},
		{"newer write replaces", 800, func(c *recordCache) { c.put(k("a"), 5, val); c.put(k("a"), 6, val) }, map[string]int64{"a": 6}},
		{"over a value budget of an eighth", 79, func(c *recordCache) { c.put(k("a"), 5, val) }, map[string]int64{}},
		{"evicts to stay within budget", 80, func(c *recordCache) {
			for i, n := range []string{"a", "b", "c", "d", "e", "f", "g", "h", "i"} {
				c.put(k(n), int64(i+1), val)
			}
		}, nil}, // checked by size below
		{"a later change drops it", 800, func(c *recordCache) {
			c.put(k("a"), 5, val)
			c.put(k("b"), 5, val)
			c.forget([]store.Change{{Key: k("a"), Revision: changeRevision(6, 0, 1)}, {Key: k("b"), Revision: changeRevision(5, 0, 1)}})
		}, map[string]int64{"b": 5}},
		{"dropped", 800, func(c *recordCache) { c.put(k("a"), 5, val); c.drop(k("a")) }, map[string]int64{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newRecordCache(tc.max)
			tc.do(c)
			if c.bytes > max(tc.max, 0) || c.bytes != len(c.m)*len(val) {
				t.Errorf("%d bytes in %d entries, budget %d", c.bytes, len(c.m), tc.max)
			}
			if tc.want == nil {
				if len(c.m) != 8 {
					t.Errorf("%d entries, want 8", len(c.m))
				}
				return
			}
			got := map[string]int64{}
			for key, e := range c.m {
				got[key.Name] = e.mod
			}
			if len(got) != len(tc.want) {
				t.Errorf("cached %v, want %v", got, tc.want)
			}
			for n, mod := range tc.want {
				if e, ok := c.get(k(n)); !ok || e.mod != mod {
					t.Errorf("get(%s) = %v, %v; want mod %d", n, e, ok, mod)
				}
			}
		})
	}
}

func TestChangeRevisions(t *testing.T) {
	// Three changes at etcd revision 7 take the last three indexes; the
	// last one resumes from revision 8, the others from 7.
	revs := []uint64{changeRevision(7, 0, 3), changeRevision(7, 1, 3), changeRevision(7, 2, 3)}
	if revs[0] <= changeRevision(6, 0, 1) || revs[0] >= revs[1] || revs[1] >= revs[2] || revs[2] >= changeRevision(8, 0, 1) {
		t.Errorf("revisions %v not strictly between those of revisions 6 and 8", revs)
	}
	for i, want := range []int64{7, 7, 8} {
		if got := resumeFrom(revs[i]); got != want || etcdRevision(revs[i]) != 7 {
			t.Errorf("change %d: resume from %d, etcd revision %d; want %d, 7", i, got, etcdRevision(revs[i]), want)
		}
	}
}

// A transaction's feed value numbers its writes' changes in order; a
// decided write takes its decision from the record in its place, and
// without that record, or undecodable, the value is corrupt.
func TestFeedValues(t *testing.T) {
	obs, err := record.EncodeChange(&store.Change{Key: target.Key{Name: "a"}, Event: &target.Event{Kind: target.EventFailed, Message: "m"}})
	if err != nil {
		t.Fatal(err)
	}
	del, err := record.EncodeChange(&store.Change{Key: target.Key{Name: "b"}, Kind: store.ChangeDeleted})
	if err != nil {
		t.Fatal(err)
	}
	s := &Store{prefix: "/p/"}
	plain, err := feedValue([]*pb.EtcdFeedWrite{{Changes: [][]byte{obs}}, {}, {Changes: [][]byte{del}}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.decodeChanges(9, plain, nil)
	if err != nil || len(got) != 2 || got[0].Revision != changeRevision(9, 0, 2) || got[0].Event.Message != "m" ||
		got[1].Kind != store.ChangeDeleted || got[1].Revision != changeRevision(9, 1, 2) {
		t.Errorf("decodeChanges = %+v, %v", got, err)
	}
	decided, err := feedValue([]*pb.EtcdFeedWrite{{}, {Decided: true, Created: true, Changes: [][]byte{obs}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := latestOf([]*mvccpb.KeyValue{{ModRevision: 9, Value: decided}}); got != changeRevision(9, 1, 2) {
		t.Errorf("latestOf = %d; want %d", got, changeRevision(9, 1, 2))
	}
	rec := &mvccpb.KeyValue{Key: []byte("/p/r/a"), ModRevision: 9}
	for _, tc := range []struct {
		name string
		val  []byte
		recs []*mvccpb.KeyValue
	}{
		{"no record in the decided write's place", decided, []*mvccpb.KeyValue{rec}},
		{"a record that holds no decision", decided, []*mvccpb.KeyValue{rec, rec}},
		{"truncated", plain[:len(plain)-1], nil},
		{"not a feed entry", []byte{0x7f}, nil},
	} {
		if _, err := s.decodeChanges(9, tc.val, tc.recs); !errors.Is(err, store.ErrCorrupt) {
			t.Errorf("%s: decodeChanges: %v, want ErrCorrupt", tc.name, err)
		}
	}
}

func TestUnavailable(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{rpctypes.ErrNoLeader, true},
		{rpctypes.ErrLeaderChanged, true},
		{rpctypes.ErrTimeout, true},
		{fmt.Errorf("txn: %w", rpctypes.ErrTimeoutDueToConnectionLost), true},
		{status.Error(codes.Unavailable, "connection refused"), true},
		{context.DeadlineExceeded, true},
		{context.Canceled, true}, // an attempt the store ended; ctxErr answers the caller's own first
		{rpctypes.ErrRequestTooLarge, false},
		{rpctypes.ErrPermissionDenied, false},
		{errors.New("anything else"), false},
	} {
		if got := unavailable(tc.err); got != tc.want {
			t.Errorf("unavailable(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
	// What a caller gets: store.ErrUnavailable, and etcd's words.
	s := &Store{}
	err := s.ctxErr(context.Background(), rpctypes.ErrLeaderChanged)
	if !errors.Is(err, store.ErrUnavailable) || !strings.Contains(err.Error(), "leader changed") {
		t.Errorf("ctxErr(leader changed) = %v, want store.ErrUnavailable naming it", err)
	}
	// An attempt the store ended while the caller's context lives is
	// unavailable, not the caller's own context error.
	for _, ended := range []error{context.Canceled, context.DeadlineExceeded} {
		err := s.ctxErr(context.Background(), ended)
		if !errors.Is(err, store.ErrUnavailable) || errors.Is(err, ended) {
			t.Errorf("ctxErr(%v) = %v, want store.ErrUnavailable and not %v", ended, err, ended)
		}
	}
}

// A batch takes the pending writes in order while they fit: one write per
// record, at most MaxWriteBytes of values and maxBatchOps operations; the
// rest wait for the next. A write whose caller has left is ended unsent.
func TestTakeBatch(t *testing.T) {
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	w := func(ctx context.Context, rk string, size, ops int) *write {
		return &write{ctx: ctx, rk: rk, size: size, ops: make([]clientv3.Op, ops), done: make(chan struct{})}
	}
	bg := context.Background()
	a, left, dup, big, b, many, c := w(bg, "a", 10, 2), w(gone, "x", 10, 2), w(bg, "a", 10, 2),
		w(bg, "big", MaxWriteBytes, 2), w(bg, "b", 10, 2), w(bg, "many", 10, maxBatchOps), w(bg, "c", 10, 3)
	s := &Store{pending: []*write{a, left, dup, big, b, many, c}}
	got := s.takeBatch()
	if !slices.Equal(got, []*write{a, b, c}) || !slices.Equal(s.pending, []*write{dup, big, many}) {
		t.Errorf("batch %v, left %v; want a, b, c and dup, big, many", rks(got), rks(s.pending))
	}
	select {
	case <-left.done:
		if !errors.Is(left.err, context.Canceled) {
			t.Errorf("the left write ended with %v, want its caller's error", left.err)
		}
	default:
		t.Error("the write whose caller left is still waiting")
	}
	// The duplicate goes once a's batch has; alone, a write of
	// MaxWriteBytes goes, and so does any other (a write has at most three
	// operations).
	for i, want := range []*write{dup, big, many} {
		if got := s.takeBatch(); !slices.Equal(got, []*write{want}) {
			t.Errorf("batch %d: %v, want %s alone", i+2, rks(got), want.rk)
		}
	}
}

func rks(ws []*write) []string {
	var out []string
	for _, w := range ws {
		out = append(out, w.rk)
	}
	return out
}

// TestKeptAfter: the feed resumes from a compacted revision C exactly after
// keptAfter(C), whether C is odd or even.
func TestKeptAfter(t *testing.T) {
	for _, c := range []int64{2, 7, 8, 1001} {
		if got := resumeFrom(keptAfter(c)); got != c {
			t.Errorf("resumeFrom(keptAfter(%d)) = %d, want %d", c, got, c)
		}
		if got := resumeFrom(keptAfter(c) - 1); got != c-1 {
			t.Errorf("resumeFrom(keptAfter(%d)-1) = %d, want %d (a change of the compacted write)", c, got, c-1)
		}
	}
}
