package etcdstore_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/setpointhq/setpoint/internal/testkit"
	"github.com/setpointhq/setpoint/store/etcdstore"
)

// A feed watch that starts far behind the feed (moved to another member
// after its own failed a probe, say) is caught up by etcd in batches of at
// most 1000 revisions, each under a header giving the member's latest
// revision. When that watch ends after its first batch, the next one
// resumes after the last change handed over, not after the header's
// revision: the followers miss nothing.
func TestFeedWatchResumesAfterItsLastChange(t *testing.T) {
	const behind = 1100 // etcd revisions the second watch starts behind: more than one batch
	ctx := t.Context()
	prefix := fmt.Sprintf("/resume-%d/", time.Now().UnixNano())
	writer := open(t, prefix)
	var (
		calls        int
		held         = make(chan struct{}) // the first watch holds its first response
		release      = make(chan struct{}) // the writes are made: end the first watch
		batched      = make(chan struct{}) // the second watch's first response is in
		header, last int64                 // that response's header and last event revisions
	)
	// Called from the reader's one watcher goroutine; the channels order
	// its writes of header and last before the test reads them.
	after := func(h, l int64) bool {
		calls++
		switch calls {
		case 1:
			close(held)
			select {
			case <-release:
			case <-ctx.Done():
			}
			return true
		case 2:
			header, last = h, l
			close(batched)
			return true
		}
		return false
	}
	reader, err := etcdstore.NewWatchedBy(ctx, client(t), etcdstore.Options{Prefix: prefix}, after)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reader.Close() })
	var read, written fed
	defer reader.Follow(read.follow)()
	defer writer.Follow(written.follow)()

	if err := decide(ctx, writer, "first", "first"); err != nil {
		t.Fatal(err)
	}
	wait := func(ch <-chan struct{}, what string) {
		t.Helper()
		select {
		case <-ch:
		case <-time.After(time.Minute):
			t.Fatalf("no %s within a minute", what)
		}
	}
	wait(held, "feed watch response")
	// While the reader's watch holds the first change, the writer records
	// changes at more than `behind` etcd revisions.
	var (
		wg   sync.WaitGroup
		errs = make([]error, 8)
	)
	for w := range errs {
		wg.Go(func() {
			name := fmt.Sprint("w", w)
			for i := 0; written.etcdRevisions() <= behind; i++ {
				if err := decide(ctx, writer, name, fmt.Sprint(name, "-", i)); err != nil {
					errs[w] = err
					return
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	close(release)
	wait(batched, "response on the restarted watch")
	if header <= last {
		t.Fatalf("etcd caught the restarted watch up in one response (header %d, last event %d): nothing to resume within", header, last)
	}
	// The changes come in order: once the reader has a change made after
	// the others, it has had every one it will ever have.
	if err := decide(ctx, writer, "marker", "marker"); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, time.Minute, "both followers have the last change", func() error {
		for _, f := range []*fed{&read, &written} {
			if !f.has([]string{"marker"}) {
				return errors.New("not yet")
			}
		}
		return nil
	})
	read.check(t)
	read.mu.Lock()
	defer read.mu.Unlock()
	got := map[uint64]bool{}
	for _, r := range read.revs {
		got[r] = true
	}
	var missed []int64
	written.mu.Lock()
	defer written.mu.Unlock()
	for _, r := range written.revs {
		if !got[r] {
			missed = append(missed, etcdstore.EtcdRevision(r))
		}
	}
	if len(missed) > 0 {
		t.Errorf("the reader missed %d of %d changes after resuming (first batch up to etcd revision %d, header %d), at etcd revisions %d…%d",
			len(missed), len(written.revs), last, header, missed[0], missed[len(missed)-1])
	}
	if len(read.revs) != len(written.revs) {
		t.Errorf("the reader was handed %d changes, the writer %d", len(read.revs), len(written.revs))
	}
}

// etcdRevisions is how many etcd revisions the decisions handed over were
// recorded at.
func (f *fed) etcdRevisions() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for i, r := range f.revs {
		if i == 0 || etcdstore.EtcdRevision(r) != etcdstore.EtcdRevision(f.revs[i-1]) {
			n++
		}
	}
	return n
}
