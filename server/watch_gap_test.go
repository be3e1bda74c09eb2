package server_test

import (
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"github.com/setpointhq/setpoint/store"
)

// gapStore is a store whose feed can be made to report a gap, as the etcd
// store's does when its watch falls behind etcd's compaction.
type gapStore struct {
	store.Store
	mu        sync.Mutex
	followers []func([]store.Change)
}

func (g *gapStore) Follow(fn func([]store.Change)) (stop func()) {
	g.mu.Lock()
	g.followers = append(g.followers, fn)
	g.mu.Unlock()
	return g.Store.Follow(fn)
}

// gap tells every follower that changes were missed.
func (g *gapStore) gap() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, f := range g.followers {
		f([]store.Change{{Kind: store.ChangeGap}})
	}
}

// TestWatchEndsAtAFeedGap: when the server's feed missed changes, every
// Watch stream is ended with where to resume (never left silently short of
// the missed changes), and resuming serves what the store still keeps.
func TestWatchEndsAtAFeedGap(t *testing.T) {
	gs := &gapStore{}
	ts := start(t, setup{wrap: func(s store.Store) store.Store { gs.Store = s; return gs }})
	c := ts.client(t)
	s, _ := watch(t, t.Context(), c, &setpointv1.WatchRequest{})
	recommendIn(t, c, "eu1", "web", 4)
	if got := recv(t, s, 1); !strings.HasPrefix(got[0], "1 ") {
		t.Fatalf("first change %v, want revision 1", got)
	}
	gs.gap()
	_, err := s.Recv()
	if status.Code(err) != codes.Aborted || !strings.Contains(err.Error(), "missed changes") || !strings.Contains(err.Error(), "resume_after=1") {
		t.Fatalf("stream after a gap: %v, want Aborted saying changes were missed and to resume after 1", err)
	}
	recommendIn(t, c, "eu1", "api", 2)
	resumed, _ := watch(t, t.Context(), c, &setpointv1.WatchRequest{ResumeAfter: 1})
	if got := recv(t, resumed, 1); !strings.HasPrefix(got[0], "2 eu1/shop/api decision") {
		t.Errorf("resumed after 1: %v, want the api decision at 2", got)
	}
}
