package ha

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	setpointclient "github.com/setpointhq/setpoint/clients/go"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
)

// rounds is how many pairs of concurrent Recommends TestConcurrentRecommends
// sends.
const rounds = 30

// TestConcurrentRecommends: two Recommends for one target sent at the same
// moment to two servers are both recorded, in one order that every view
// shows: the history read from each server, each server's Watch feed and
// the decision log; the one recorded second decided from a history that
// held the first, and Observe takes it, not the first, as the last
// decision.
func TestConcurrentRecommends(t *testing.T) {
	c := startCluster(t, skewed(*skew))
	clients := c.dial(t)
	ctx, cancel := context.WithCancel(t.Context())
	var feeds []*feed
	for _, cl := range clients {
		feeds = append(feeds, watch(ctx, t, cl))
	}

	var clamped int
	for r := range rounds {
		name := fmt.Sprintf("pair-%d", r)
		if _, err := clients[0].Recommend(t.Context(), request(name, 1, 1)); err != nil {
			t.Fatalf("set up %s: %v", name, err)
		}
		// Two servers, a different pair each round; which proposal is the
		// larger alternates.
		via := [2]int{r % servers, (r + 1) % servers}
		p := [2]int32{100, 200}
		if r%2 == 1 {
			p = [2]int32{200, 100}
		}
		var (
			got   [2]*setpointv1.Decision
			errs  [2]error
			wg    sync.WaitGroup
			start = make(chan struct{})
		)
		for i := range 2 {
			wg.Go(func() {
				<-start
				resp, err := clients[via[i]].Recommend(t.Context(), request(name, replicas, p[i]))
				got[i], errs[i] = resp.GetDecision(), err
			})
		}
		close(start)
		wg.Wait()
		for i := range 2 {
			if errs[i] != nil {
				t.Fatalf("%s: Recommend(%d) via server %d: %v", name, p[i], via[i], errs[i])
			}
		}

		// The order, as each server's history has it.
		var first, second int
		for s, cl := range clients {
			tg, err := cl.Target(t.Context(), key(name))
			if err != nil {
				t.Fatalf("GetTarget %s from server %d: %v", name, s, err)
			}
			recs, _ := seen(tg)
			order := []int{slices.Index(recs, p[0]), slices.Index(recs, p[1])}
			if len(recs) != 2 || order[0] < 0 || order[1] < 0 {
				t.Fatalf("%s: history on server %d holds proposals %v, want %d and %d once each", name, s, recs, p[0], p[1])
			}
			f, sc := 0, 1
			if order[1] < order[0] {
				f, sc = 1, 0
			}
			if s == 0 {
				first, second = f, sc
			} else if f != first {
				t.Errorf("%s: server %d's history has the two decisions in the other order than server 0's", name, s)
			}
			if last := tg.GetLastDecision().GetDecisionId(); last != got[second].GetDecisionId() {
				t.Errorf("%s: server %d's last decision is %s, want the second recorded, %s", name, s, last, got[second].GetDecisionId())
			}
		}
		// Each decided from the history before it.
		if d := got[first].GetDesiredReplicas(); d != p[first] {
			t.Errorf("%s: the first recorded decision (proposal %d) decided %d: it saw a history it came before", name, p[first], d)
		}
		if d := got[second].GetDesiredReplicas(); d != max(p[0], p[1]) {
			t.Errorf("%s: the second recorded decision (proposal %d) decided %d, want %d: it did not see the first", name, p[second], d, max(p[0], p[1]))
		}
		// Observe takes the second as the last decision, not the first,
		// whichever server it is reported to: each is reported to the
		// server that did not make it (an agent balancing over the servers
		// may), so the server that made the first decision and last wrote
		// the target must see the second.
		if _, err := clients[via[second]].Applied(t.Context(), key(name), got[first].GetDecisionId(), replicas, got[first].GetDesiredReplicas()); status.Code(err) != codes.InvalidArgument {
			t.Errorf("%s: Observe(applied) of the first recorded decision via server %d: %v, want InvalidArgument (not the last decision)", name, via[second], err)
		}
		if _, err := clients[via[first]].Applied(t.Context(), key(name), got[second].GetDecisionId(), replicas, got[second].GetDesiredReplicas()); err != nil {
			t.Errorf("%s: Observe(applied) of the last decision via server %d (which made the first): %v", name, via[first], err)
		}
		// The decision log lists them in the same order.
		var logged []int64
		for _, d := range decisionLog(t, clients[r%servers], name) {
			logged = append(logged, d.GetDecisionTime().AsTime().UnixNano())
		}
		want := []int64{got[first].GetDecisionTime().AsTime().UnixNano(), got[second].GetDecisionTime().AsTime().UnixNano()}
		if want[1]-want[0] == 1 {
			clamped++ // the second read the clock before the first was recorded
		}
		if i, j := slices.Index(logged, want[0]), slices.Index(logged, want[1]); i < 0 || j < 0 || i > j {
			t.Errorf("%s: the decision log has the decisions at %v (ns), want the first recorded (%d) before the second (%d)", name, logged, want[0], want[1])
		}
		// So do the Watch feeds, once they have both.
		for s, f := range feeds {
			ids := f.wait(t, name, 2+1) // the set-up decision and the pair
			if ids[1] != got[first].GetDecisionId() || ids[2] != got[second].GetDecisionId() {
				t.Errorf("%s: server %d's Watch feed has decisions %v, want the set-up then %s then %s", name, s, ids, got[first].GetDecisionId(), got[second].GetDecisionId())
			}
		}
	}
	cancel()
	t.Logf("%d rounds; in %d the decision recorded second was stamped a nanosecond after the first (it read its clock before the first was recorded, or its clock is behind)", rounds, clamped)
}

// feed is the decisions one server's Watch stream delivered, by target.
type feed struct {
	mu   sync.Mutex
	cond *sync.Cond
	ids  map[string][]string
	err  error
}

// watch follows the decisions of the tests' targets on cl until ctx ends;
// it returns once the stream is subscribed.
func watch(ctx context.Context, t *testing.T, cl *setpointclient.Client) *feed {
	t.Helper()
	stream, err := cl.Watch(ctx, &setpointv1.WatchRequest{Cluster: "ha", Namespace: "ns"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Header(); err != nil {
		t.Fatal(err)
	}
	f := &feed{ids: map[string][]string{}}
	f.cond = sync.NewCond(&f.mu)
	go func() {
		for {
			m, err := stream.Recv()
			f.mu.Lock()
			if err != nil {
				f.err = err
				f.cond.Broadcast()
				f.mu.Unlock()
				return
			}
			if d := m.GetDecision(); d != nil {
				f.ids[m.GetTarget().GetName()] = append(f.ids[m.GetTarget().GetName()], d.GetDecisionId())
				f.cond.Broadcast()
			}
			f.mu.Unlock()
		}
	}()
	return f
}

// wait returns the first n decisions of target name, once delivered.
func (f *feed) wait(t *testing.T, name string, n int) []string {
	t.Helper()
	late := false
	timer := time.AfterFunc(30*time.Second, func() {
		f.mu.Lock()
		late = true
		f.cond.Broadcast()
		f.mu.Unlock()
	})
	defer timer.Stop()
	f.mu.Lock()
	defer f.mu.Unlock()
	for len(f.ids[name]) < n && f.err == nil && !late {
		f.cond.Wait()
	}
	switch {
	case f.err != nil:
		t.Fatalf("Watch ended: %v", f.err)
	case late:
		t.Fatalf("%s: the Watch feed delivered %d decisions in 30 s, want %d", name, len(f.ids[name]), n)
	}
	return f.ids[name][:n]
}
