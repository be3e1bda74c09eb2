// Package watch is the Watch stream of Setpoint's gRPC service and what
// it resumes from: a Hub fans the store's change feed (store.Feed) out to
// the streams without ever blocking the store's committer — each stream
// has a bounded buffer and is ended with Aborted, to resume, when it falls
// behind or the feed misses changes — and Streams serves each stream the
// changes its caller may read, catching up from the store after a resume
// point first.
//
// A caller that may read every cluster sees the feed's revisions; any
// other sees resume points (ResumePoints, resume.go): the revision sealed
// under a key of the principal's own, so that it learns nothing of other
// tenants' writes and cannot use another principal's points. Those
// points also move only with the changes of the clusters the caller may
// read: a stream's header gives the latest of them (the Hub keeps each
// cluster's latest revision), never the feed's latest. Package server
// wires both; this package imports nothing of it.
package watch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"github.com/setpointhq/setpoint/server/auth"
	"github.com/setpointhq/setpoint/server/convert"
	"github.com/setpointhq/setpoint/store"
	"github.com/setpointhq/setpoint/target"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// DefaultWatchBuffer is the default number of changes buffered for one
// Watch stream before it is ended as too slow.
const DefaultWatchBuffer = 1024

// RevisionHeader is the response header of a Watch stream giving the
// revision the stream starts after: a client that has received no change
// yet resumes from it.
const RevisionHeader = "setpoint-revision"

// watchPage is how many stored changes a resuming Watch reads at once. A
// change holds one decision, whose size the spec budget bounds (181 KB
// measured for a maximal spec), so a resuming stream holds at most about
// 3 MB.
const watchPage = 16

// Hub fans the store's change feed out to Watch streams. It never blocks
// the store's committer: each stream has a bounded buffer, and a stream
// whose buffer is full is cut off (told to resume) instead of waited for.
type Hub struct {
	feed   store.Feed
	buffer int
	stop   func()

	// cutoff, when set, is called (under mu) for each watcher cut off.
	cutoff func() // set before following, never changed

	mu     sync.Mutex
	latest uint64 // revision of the latest change published
	// floor is a revision after which the hub has been published every
	// change (the store's at NewHub, moved on after a gap), and clusters
	// the revision of the latest change published of each cluster since:
	// together they give the latest change of a set of clusters without
	// reading the store (visible). gapped says a gap was published and
	// floor awaits the next change.
	floor     uint64
	clusters  map[string]uint64
	gapped    bool
	closed    bool
	watchers  map[*watcher]struct{}
	observers []func([]store.Change)
}

// watcher is one Watch stream's subscription.
type watcher struct {
	match func(target.Key) bool
	ch    chan store.Change
	// ended is closed when the hub drops the watcher: cut is true when it
	// fell behind, false when the server is shutting down.
	ended chan struct{}
	cut   bool
	// gap is true when it was cut because the feed missed changes.
	gap bool
}

// NewHub follows feed; Close stops it. cutoff, when not nil, is called for
// each stream cut off.
func NewHub(ctx context.Context, feed store.Feed, buffer int, cutoff func()) (*Hub, error) {
	h := &Hub{feed: feed, buffer: buffer, cutoff: cutoff, watchers: map[*watcher]struct{}{}, clusters: map[string]uint64{}}
	h.stop = feed.Follow(h.publish)
	rev, err := feed.Revision(ctx)
	if err != nil {
		h.stop()
		return nil, err
	}
	h.mu.Lock()
	h.latest = max(h.latest, rev)
	// Every change after rev is published to the hub (Follow began
	// first); those published before Revision answered are known too.
	h.floor = rev
	h.mu.Unlock()
	return h, nil
}

// publish is the store's Follow callback: it queues each change to the
// watchers it matches, cutting off those whose buffer is full.
func (h *Hub) publish(cs []store.Change) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if slices.ContainsFunc(cs, func(c store.Change) bool { return c.Kind == store.ChangeGap }) {
		h.missed(cs)
		return
	}
	h.latest = max(h.latest, cs[len(cs)-1].Revision)
	if h.gapped {
		// The changes before this commit's were missed: what the hub
		// knows of each cluster starts after them.
		h.floor, h.gapped = cs[0].Revision-1, false
	}
	for _, c := range cs {
		h.clusters[c.Key.Cluster] = c.Revision
	}
	for _, o := range h.observers {
		o(cs)
	}
	for w := range h.watchers {
		for _, c := range cs {
			if !w.match(c.Key) {
				continue
			}
			select {
			case w.ch <- c:
				continue
			default:
			}
			w.cut = true
			h.drop(w)
			if h.cutoff != nil {
				h.cutoff()
			}
			break
		}
	}
}

// missed handles a gap in the feed (a call of its own, store.ChangeGap):
// the observers are told, and every watcher is cut off, so that its
// caller resumes and learns from the store whether what it missed is still
// kept; h.mu is held.
func (h *Hub) missed(cs []store.Change) {
	h.gapped = true
	for _, o := range h.observers {
		o(cs)
	}
	for w := range h.watchers {
		w.cut, w.gap = true, true
		h.drop(w)
		if h.cutoff != nil {
			h.cutoff()
		}
	}
}

// Observe makes fn see every commit's changes, like the watchers, from
// the store's committer; fn must not block.
func (h *Hub) Observe(fn func([]store.Change)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.observers = append(h.observers, fn)
}

// Revision returns the revision of the latest change published.
func (h *Hub) Revision() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.latest
}

// drop ends w; h.mu is held.
func (h *Hub) drop(w *watcher) {
	delete(h.watchers, w)
	close(w.ended)
}

// subscribe registers a watcher of the changes whose key match accepts and
// returns it with the latest revision published before it (every later
// change it matches is queued to it) and the visible revision of the
// clusters cluster accepts (match accepts no key of another cluster).
func (h *Hub) subscribe(match func(target.Key) bool, cluster func(string) bool) (w *watcher, latest, visible uint64, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, 0, 0, store.ErrClosed
	}
	w = &watcher{match: match, ch: make(chan store.Change, h.buffer), ended: make(chan struct{})}
	h.watchers[w] = struct{}{}
	return w, h.latest, h.unsafeVisible(cluster), nil
}

// unsafeVisible returns a revision v ≤ h.latest such that no change of a
// cluster that cluster accepts came after v up to h.latest: the latest
// such change, or the floor when none came since. It depends only on the
// changes of those clusters (and on when the hub started), so a tenant
// whose point it is learns nothing of other clusters' writes. While a
// gap's extent is unknown it is h.latest. h.mu is held.
func (h *Hub) unsafeVisible(cluster func(string) bool) uint64 {
	if h.gapped {
		return h.latest
	}
	v := h.floor
	for c, rev := range h.clusters {
		if rev > v && cluster(c) {
			v = rev
		}
	}
	return v
}

// unsubscribe removes w, when still registered.
func (h *Hub) unsubscribe(w *watcher) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.watchers[w]; ok {
		h.drop(w)
	}
}

// Close stops following the store and ends every watcher (its stream
// answers Unavailable). Later subscriptions fail.
func (h *Hub) Close() {
	h.stop()
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for w := range h.watchers {
		h.drop(w)
	}
}

// Streams serves Watch streams from a Hub: the changes each caller may
// read, under the revisions or resume points it sees.
type Streams struct {
	// Hub is the change feed the streams follow.
	Hub *Hub
	// Resume seals the resume points of tenants (resume.go).
	Resume *ResumePoints
	// Authenticated says callers are authenticated: a stream without a
	// principal is refused.
	Authenticated bool
	// Log receives the errors ToStatus logs.
	Log *slog.Logger
	// ToStatus maps an error to the status the caller is answered.
	ToStatus func(context.Context, *slog.Logger, error) error
	// MayRead returns nil when the caller of ctx may read cluster, else
	// the status it is answered.
	MayRead func(ctx context.Context, cluster string) error
	// Open counts the streams open.
	Open prometheus.Gauge
}

// Watch streams the changes recorded after the request's resume point
// that match its filter and that the caller may read.
//
// Every point the caller is given — the header's, a change's, the one an
// ending stream names — is the revision of a change it was sent, or
// (before any) the visible revision of the clusters its stream may see
// (Hub.unsafeVisible): never a revision that moved because another
// tenant wrote.
func (s *Streams) Watch(req *setpointv1.WatchRequest, stream grpc.ServerStreamingServer[setpointv1.WatchResponse]) error {
	ctx := stream.Context()
	if err := Validate(req); err != nil {
		return s.ToStatus(ctx, s.Log, err)
	}
	match, cluster, err := s.watchFilter(ctx, req)
	if err != nil {
		return err
	}
	w, latest, visible, err := s.Hub.subscribe(match, cluster)
	if err != nil {
		return s.ToStatus(ctx, s.Log, err)
	}
	defer s.Hub.unsubscribe(w)
	s.Open.Inc()
	defer s.Open.Dec()

	// point is what the caller sees of a revision: the revision itself
	// for a caller that reads every cluster, a sealed resume point for
	// any other (resume.go). last is the revision the stream has read
	// the feed up to; shown the point the caller resumes from, which
	// moves only with the changes it is sent.
	point := func(rev uint64) uint64 { return rev }
	seal, sealed := s.sealerFor(ctx)
	if sealed {
		point = seal.seal
	}
	last, shown := latest, latest
	if sealed {
		shown = visible
	}
	if after := req.GetResumeAfter(); after > 0 {
		rev := after
		if sealed {
			if rev, err = seal.open(after); err != nil {
				e := &setpointv1.ValidationError{}
				e.Add("resume_after", "%v: resume from a point a stream's header or changes gave you, or watch without it", err)
				return s.ToStatus(ctx, s.Log, e.Err())
			}
		}
		switch {
		case rev > latest:
			// Another server gave the point out, its feed ahead of this
			// one's: the store says whether it names a revision at all.
			// The changes up to it are skipped as they arrive.
			stored, err := s.Hub.feed.Revision(ctx)
			if err != nil {
				return s.ToStatus(ctx, s.Log, err)
			}
			if rev > stored {
				return status.Error(codes.OutOfRange, "watch: resume_after is ahead of every change the store has; watch without resume_after")
			}
			last = rev
		case rev < visible:
			last = rev // catch up from the store
		default:
			// Nothing of the stream's clusters came after rev: no need
			// to read (or to find compacted) the others' changes.
		}
		shown = rev
	}
	if err := stream.SendHeader(metadata.Pairs(RevisionHeader, strconv.FormatUint(point(shown), 10))); err != nil {
		return err
	}
	// Catch up from the store up to the revision the subscription started
	// after; the watcher's buffer holds everything later.
	for last < latest {
		cs, err := s.Hub.feed.Changes(ctx, last, watchPage)
		if errors.Is(err, store.ErrOutOfRange) {
			return status.Errorf(codes.OutOfRange, "watch: the changes after resume point %d are no longer kept; read the targets again and watch without resume_after", point(shown))
		} else if err != nil {
			return s.ToStatus(ctx, s.Log, err)
		}
		if len(cs) == 0 {
			break
		}
		for _, c := range cs {
			if match(c.Key) {
				if err := stream.Send(watchResponse(c, point)); err != nil {
					return err
				}
				shown = c.Revision
			}
			last = c.Revision
		}
	}
	for {
		select {
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		case <-w.ended:
			if w.gap {
				return status.Errorf(codes.Aborted, "watch: this server's change feed missed changes (it fell behind the store's compaction) and the stream was ended; resume with resume_after=%d", point(shown))
			}
			if w.cut {
				return status.Errorf(codes.Aborted, "watch: the stream fell behind by more than %d changes and was ended; resume with resume_after=%d", s.Hub.buffer, point(shown))
			}
			return status.Errorf(codes.Unavailable, "watch: the server is shutting down; resume with resume_after=%d", point(shown))
		case c := <-w.ch:
			if c.Revision <= last {
				continue // already sent while catching up
			}
			if err := stream.Send(watchResponse(c, point)); err != nil {
				return err
			}
			last, shown = c.Revision, c.Revision
		}
	}
}

// Validate checks a Watch request's filter: a namespace needs a cluster, a
// name a namespace, and a cluster starting with "@" is the service's own
// (its fleets), not one of targets.
func Validate(req *setpointv1.WatchRequest) error {
	e := &setpointv1.ValidationError{}
	if strings.HasPrefix(req.GetCluster(), "@") {
		e.Add("cluster", "must not start with '@' (reserved for the service's own records)")
	}
	if req.GetNamespace() != "" && req.GetCluster() == "" {
		e.Add("namespace", "requires cluster")
	}
	if req.GetName() != "" && req.GetNamespace() == "" {
		e.Add("name", "requires namespace")
	}
	return e.Err()
}

// watchFilter returns the filter of a Watch — the request's cluster,
// namespace and name, and the clusters the caller may read — and its
// clusters: those of the request the caller may read. A cluster the
// caller may not read is PermissionDenied.
func (s *Streams) watchFilter(ctx context.Context, req *setpointv1.WatchRequest) (match func(target.Key) bool, clusters func(string) bool, err error) {
	cluster, namespace, name := req.GetCluster(), req.GetNamespace(), req.GetName()
	if cluster != "" {
		if err := s.MayRead(ctx, cluster); err != nil {
			return nil, nil, err
		}
	}
	may := func(string) bool { return true }
	if s.Authenticated {
		p, ok := auth.PrincipalFrom(ctx)
		if !ok {
			return nil, nil, status.Error(codes.Unauthenticated, "not authenticated")
		}
		may = p.CanRead
	}
	// Clusters starting with "@" hold the service's own records (its
	// fleets): never targets.
	clusters = func(c string) bool { return (cluster == "" || c == cluster) && may(c) && !strings.HasPrefix(c, "@") }
	return func(k target.Key) bool {
		return clusters(k.Cluster) &&
			(namespace == "" || k.Namespace == namespace) &&
			(name == "" || k.Name == name)
	}, clusters, nil
}

// sealerFor returns the resume-point permutation of the caller, and false
// for a caller that sees revisions as they are: one that reads every
// cluster, or any caller of a server without authentication.
func (s *Streams) sealerFor(ctx context.Context) (sealer, bool) {
	p, ok := auth.PrincipalFrom(ctx)
	if !s.Authenticated || !ok || p.CanRead("") {
		return sealer{}, false
	}
	return s.Resume.sealer(p.Name), true
}

// watchResponse is the API form of a change; point turns its revision
// into what the caller sees.
func watchResponse(c store.Change, point func(uint64) uint64) *setpointv1.WatchResponse {
	out := &setpointv1.WatchResponse{
		Revision: point(c.Revision),
		Target:   &setpointv1.TargetKey{Cluster: c.Key.Cluster, Namespace: c.Key.Namespace, Name: c.Key.Name},
	}
	switch c.Kind {
	case store.ChangeDecision:
		out.Change = &setpointv1.WatchResponse_Decision{Decision: convert.Decision(*c.Decision)}
	case store.ChangeObservation:
		e := c.Event
		out.Change = &setpointv1.WatchResponse_Observation{Observation: &setpointv1.Event{
			Kind: string(e.Kind), From: e.From, To: e.To, Time: timestamppb.New(e.At), DecisionId: e.DecisionID, Message: e.Message,
		}}
	case store.ChangeDeleted:
		out.Change = &setpointv1.WatchResponse_Deleted{Deleted: &setpointv1.TargetDeleted{Time: timestamppb.New(c.At)}}
	default:
		panic(fmt.Sprintf("server: change of unknown kind %q", c.Kind))
	}
	return out
}
