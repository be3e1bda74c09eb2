package server_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"github.com/setpointhq/setpoint/server"
	"github.com/setpointhq/setpoint/store/boltstore"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// watch opens a Watch stream and waits for its header, so that every
// change made after watch returns is delivered. It returns the stream and
// the revision of the header.
func watch(t *testing.T, ctx context.Context, c setpointv1.AutoscalerServiceClient, req *setpointv1.WatchRequest) (grpc.ServerStreamingClient[setpointv1.WatchResponse], uint64) {
	t.Helper()
	s, err := c.Watch(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	md, err := s.Header()
	if err != nil {
		t.Fatalf("Watch header: %v", err)
	}
	v := md.Get(server.RevisionHeader)
	if len(v) != 1 {
		t.Fatalf("Watch header %v has no %s", md, server.RevisionHeader)
	}
	rev, err := strconv.ParseUint(v[0], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return s, rev
}

// change summarizes a WatchResponse: "rev name kind", kind being the
// decision's desired replicas, the event kind or "deleted".
func change(r *setpointv1.WatchResponse) string {
	var what string
	switch c := r.GetChange().(type) {
	case *setpointv1.WatchResponse_Decision:
		what = fmt.Sprintf("decision %d", c.Decision.GetDesiredReplicas())
	case *setpointv1.WatchResponse_Observation:
		what = "observed " + c.Observation.GetKind()
	case *setpointv1.WatchResponse_Deleted:
		what = "deleted"
	}
	k := r.GetTarget()
	return fmt.Sprintf("%d %s/%s/%s %s", r.GetRevision(), k.GetCluster(), k.GetNamespace(), k.GetName(), what)
}

// recv receives n changes from s, summarized.
func recv(t *testing.T, s grpc.ServerStreamingClient[setpointv1.WatchResponse], n int) []string {
	t.Helper()
	var out []string
	for range n {
		r, err := s.Recv()
		if err != nil {
			t.Fatalf("Recv after %v: %v", out, err)
		}
		out = append(out, change(r))
	}
	return out
}

// recommendIn makes a decision for cluster/shop/name with n pods (the
// decision is ceil(1.6 n)) and returns its id.
func recommendIn(t *testing.T, c setpointv1.AutoscalerServiceClient, cluster, name string, n int) string {
	t.Helper()
	req := request(name, n, t0)
	req.Target.Cluster = cluster
	resp, err := c.Recommend(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	return resp.GetDecision().GetDecisionId()
}

func TestWatchStreamsChangesAsTheyHappen(t *testing.T) {
	ts := start(t, setup{})
	c := ts.client(t)
	s, rev := watch(t, t.Context(), c, &setpointv1.WatchRequest{})
	if rev != 0 {
		t.Errorf("header revision of an empty store = %d, want 0", rev)
	}
	id := recommendIn(t, c, "eu1", "web", 4)
	if _, err := c.Observe(t.Context(), &setpointv1.ObserveRequest{Target: key("web"), DecisionId: id,
		Change: &setpointv1.ObserveRequest_Applied{Applied: &setpointv1.AppliedChange{From: 4, To: 7}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeleteTarget(t.Context(), &setpointv1.DeleteTargetRequest{Target: key("web")}); err != nil {
		t.Fatal(err)
	}
	r, err := s.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if d := r.GetDecision(); d.GetDecisionId() != id || d.GetDesiredReplicas() != 7 || len(d.GetExplanation().GetMetrics()) != 1 {
		t.Errorf("first change = %v, want the decision %s to 7 with its explanation", r, id)
	}
	want := []string{"2 eu1/shop/web observed Applied", "3 eu1/shop/web deleted"}
	if d := cmp.Diff(want, recv(t, s, 2)); d != "" {
		t.Errorf("changes (-want +got):\n%s", d)
	}
}

func TestWatchFilters(t *testing.T) {
	ts := start(t, setup{})
	c := ts.client(t)
	ctx := t.Context()
	cluster, _ := watch(t, ctx, c, &setpointv1.WatchRequest{Cluster: "eu1"})
	namespace, _ := watch(t, ctx, c, &setpointv1.WatchRequest{Cluster: "eu1", Namespace: "shop"})
	target, _ := watch(t, ctx, c, &setpointv1.WatchRequest{Cluster: "eu1", Namespace: "shop", Name: "web"})
	other, _ := watch(t, ctx, c, &setpointv1.WatchRequest{Cluster: "eu2"})

	recommendIn(t, c, "eu1", "web", 1) // 1: 2 replicas
	recommendIn(t, c, "eu1", "api", 2) // 2: 4
	recommendIn(t, c, "eu2", "web", 3) // 3: 5
	req := request("web", 4, t0)       // 4: another namespace of eu1
	req.Target.Namespace = "ops"
	if _, err := c.Recommend(ctx, req); err != nil {
		t.Fatal(err)
	}
	recommendIn(t, c, "eu1", "web", 5) // 5: 8, the last change each eu1 watcher sees
	recommendIn(t, c, "eu2", "api", 6) // 6: 10, the last change eu2 sees

	for _, tt := range []struct {
		name   string
		stream grpc.ServerStreamingClient[setpointv1.WatchResponse]
		want   []string
	}{
		{"cluster", cluster, []string{"1 eu1/shop/web decision 2", "2 eu1/shop/api decision 4", "4 eu1/ops/web decision 7", "5 eu1/shop/web decision 8"}},
		{"namespace", namespace, []string{"1 eu1/shop/web decision 2", "2 eu1/shop/api decision 4", "5 eu1/shop/web decision 8"}},
		{"target", target, []string{"1 eu1/shop/web decision 2", "5 eu1/shop/web decision 8"}},
		{"other cluster", other, []string{"3 eu2/shop/web decision 5", "6 eu2/shop/api decision 10"}},
	} {
		if d := cmp.Diff(tt.want, recv(t, tt.stream, len(tt.want))); d != "" {
			t.Errorf("%s (-want +got):\n%s", tt.name, d)
		}
	}

	for _, bad := range []*setpointv1.WatchRequest{{Namespace: "shop"}, {Cluster: "eu1", Name: "web"}} {
		s, err := c.Watch(ctx, bad)
		if err == nil {
			_, err = s.Recv()
		}
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("Watch(%v) = %v, want InvalidArgument", bad, err)
		}
	}
}

// TestWatchResumeMissesNothing: a client that disconnects, and resumes
// with the last revision it saw (also from a restarted server over the
// same file), receives exactly the changes it missed, then live ones.
func TestWatchResumeMissesNothing(t *testing.T) {
	ts := start(t, setup{})
	c := ts.client(t)
	ctx, cancel := context.WithCancel(t.Context())
	s, _ := watch(t, ctx, c, &setpointv1.WatchRequest{Cluster: "eu1"})
	recommendIn(t, c, "eu1", "web", 1)
	recommendIn(t, c, "eu1", "api", 2)
	got := recv(t, s, 2)
	cancel()

	// Missed while disconnected: two of eu1, one of eu2.
	recommendIn(t, c, "eu1", "web", 3)
	recommendIn(t, c, "eu2", "web", 3)
	recommendIn(t, c, "eu1", "api", 4)

	s, rev := watch(t, t.Context(), c, &setpointv1.WatchRequest{Cluster: "eu1", ResumeAfter: 2})
	if rev != 2 {
		t.Errorf("header revision = %d, want the resume point 2", rev)
	}
	got = append(got, recv(t, s, 2)...)
	recommendIn(t, c, "eu1", "web", 5) // live after the catch-up
	got = append(got, recv(t, s, 1)...)
	want := []string{
		"1 eu1/shop/web decision 2", "2 eu1/shop/api decision 4",
		"3 eu1/shop/web decision 5", "5 eu1/shop/api decision 7",
		"6 eu1/shop/web decision 8",
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("changes (-want +got):\n%s", d)
	}

	// The revision survives a restart: resume from a new server on the file.
	ts.stop(t)
	ts2 := start(t, setup{path: ts.path})
	c2 := ts2.client(t)
	recommendIn(t, c2, "eu1", "api", 1)
	s, _ = watch(t, t.Context(), c2, &setpointv1.WatchRequest{Cluster: "eu1", ResumeAfter: 6})
	if d := cmp.Diff([]string{"7 eu1/shop/api decision 2"}, recv(t, s, 1)); d != "" {
		t.Errorf("after restart (-want +got):\n%s", d)
	}
}

func TestWatchResumeOutOfRange(t *testing.T) {
	ts := start(t, setup{storeOpts: boltstore.Options{MaxChanges: 3}})
	c := ts.client(t)
	for i := range 5 {
		recommendIn(t, c, "eu1", "web", i+1)
	}
	// Revisions 3..5 are kept: resuming after 2 works, after 1 does not.
	s, _ := watch(t, t.Context(), c, &setpointv1.WatchRequest{ResumeAfter: 2})
	if got := recv(t, s, 3); !strings.HasPrefix(got[0], "3 ") || !strings.HasPrefix(got[2], "5 ") {
		t.Errorf("resume after 2 = %v, want revisions 3..5", got)
	}
	for _, after := range []uint64{1, 6} {
		s, err := c.Watch(t.Context(), &setpointv1.WatchRequest{ResumeAfter: after})
		if err == nil {
			_, err = s.Recv()
		}
		if status.Code(err) != codes.OutOfRange {
			t.Errorf("resume after %d: %v, want OutOfRange", after, err)
		}
	}
}

// TestWatchSlowConsumerIsCutOff: a stream whose client stops reading is
// ended with Aborted once its buffer is full, while decisions and the
// other streams go on; it resumes from its last revision and misses
// nothing.
func TestWatchSlowConsumerIsCutOff(t *testing.T) {
	ts := start(t, setup{opts: server.Options{WatchBuffer: 4}})
	c := ts.client(t)
	slowConn := dial(t, ts.addr) // its own connection: its flow control fills, not the others'
	// A deadline, so that a slow stream never cut off fails the test instead of hanging it.
	slowCtx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	slow, _ := watch(t, slowCtx, setpointv1.NewAutoscalerServiceClient(slowConn), &setpointv1.WatchRequest{})
	fast, _ := watch(t, t.Context(), c, &setpointv1.WatchRequest{})

	const n = 300 // ~1.5 KB each: far more than the stream's flow-control window
	fastDone := make(chan []string, 1)
	go func() {
		var got []string
		for range n {
			r, err := fast.Recv()
			if err != nil {
				break
			}
			got = append(got, change(r))
		}
		fastDone <- got
	}()
	for i := range n {
		recommendIn(t, c, "eu1", fmt.Sprintf("web-%d", i), 1+i%8)
	}
	if got := <-fastDone; len(got) != n || !strings.HasPrefix(got[n-1], fmt.Sprint(n, " ")) {
		t.Fatalf("fast watcher got %d changes, want %d", len(got), n)
	}

	// The slow client now reads: what was in flight, then the end.
	var last uint64
	var err error
	for {
		var r *setpointv1.WatchResponse
		if r, err = slow.Recv(); err != nil {
			break
		}
		if r.GetRevision() != last+1 {
			t.Fatalf("slow watcher: revision %d after %d", r.GetRevision(), last)
		}
		last = r.GetRevision()
	}
	if status.Code(err) != codes.Aborted || !strings.Contains(err.Error(), fmt.Sprint("resume_after=", last)) {
		t.Fatalf("slow watcher ended with %v after revision %d, want Aborted telling it to resume after %d", err, last, last)
	}
	t.Logf("slow watcher cut off after revision %d of %d", last, n)
	if last >= n {
		t.Fatalf("slow watcher received all %d changes: it was never behind", last)
	}
	resumed, _ := watch(t, t.Context(), c, &setpointv1.WatchRequest{ResumeAfter: last})
	rest := recv(t, resumed, n-int(last))
	if !strings.HasPrefix(rest[0], fmt.Sprint(last+1, " ")) || !strings.HasPrefix(rest[len(rest)-1], fmt.Sprint(n, " ")) {
		t.Errorf("resumed from %d: %s … %s", last, rest[0], rest[len(rest)-1])
	}
}

func TestWatchPermissions(t *testing.T) {
	auth := authFromFile(t, `{"principals": [
	  {"name": "dash-eu1", "role": "platform", "clusters": ["eu1"], "token_sha256": ["`+sha256hex("eu1-reader")+`"]},
	  {"name": "ops", "role": "admin", "token_sha256": ["`+sha256hex("admin")+`"]}
	]}`)
	ts := start(t, setup{opts: server.Options{Auth: auth}})
	as := func(token string) setpointv1.AutoscalerServiceClient {
		return ts.client(t, grpc.WithTransportCredentials(insecureCreds()), grpc.WithPerRPCCredentials(bearer(token)))
	}
	admin, reader := as("admin"), as("eu1-reader")
	all, _ := watch(t, t.Context(), reader, &setpointv1.WatchRequest{})
	recommendIn(t, admin, "eu2", "web", 1)
	recommendIn(t, admin, "eu1", "web", 2)
	// The restricted reader gets only eu1's change, under a sealed resume
	// point rather than the revision (2) that counts eu2's writes too.
	got := recv(t, all, 1)
	if rev, rest, _ := strings.Cut(got[0], " "); rev == "2" || rest != "eu1/shop/web decision 4" {
		t.Errorf("restricted reader sees %q, want eu1/shop/web decision 4 under a sealed point", got[0])
	}
	for _, tt := range []struct {
		name   string
		client setpointv1.AutoscalerServiceClient
		req    *setpointv1.WatchRequest
		code   codes.Code
	}{
		{"other cluster", reader, &setpointv1.WatchRequest{Cluster: "eu2"}, codes.PermissionDenied},
		{"no token", ts.client(t), &setpointv1.WatchRequest{Cluster: "eu1"}, codes.Unauthenticated},
		{"bad token", as("nope"), &setpointv1.WatchRequest{}, codes.Unauthenticated},
		{"other cluster seed", reader, nil, codes.PermissionDenied},
	} {
		if tt.req == nil { // Simulate seeded from a target the caller may not read
			_, err := tt.client.Simulate(t.Context(), &setpointv1.SimulateRequest{Spec: legacySpec("web"), SeedFrom: &setpointv1.TargetKey{Cluster: "eu2", Namespace: "shop", Name: "web"},
				Steps: []*setpointv1.SimulateStep{step("web", 1, t0.Add(time.Hour), "")}})
			if status.Code(err) != tt.code {
				t.Errorf("%s: %v, want %v", tt.name, err, tt.code)
			}
			continue
		}
		s, err := tt.client.Watch(t.Context(), tt.req)
		if err == nil {
			_, err = s.Recv()
		}
		if status.Code(err) != tt.code {
			t.Errorf("%s: %v, want %v", tt.name, err, tt.code)
		}
	}
}

// TestWatchEndsAtShutdown: shutting the server down ends open streams with
// Unavailable instead of waiting for them.
func TestWatchEndsAtShutdown(t *testing.T) {
	ts := start(t, setup{opts: server.Options{ShutdownTimeout: time.Hour}})
	s, _ := watch(t, t.Context(), ts.client(t), &setpointv1.WatchRequest{})
	ts.stop(t)
	if _, err := s.Recv(); status.Code(err) != codes.Unavailable {
		t.Errorf("Recv after shutdown: %v, want Unavailable", err)
	}
}

// TestWatchResumePointsOfTenants: a caller that may not read every cluster
// sees sealed resume points, not the feed's revisions (which count every
// tenant's writes); its points resume without missing or repeating a
// change, also after a restart with the same key, and are refused, naming
// resume_after, when forged, another principal's, or made under another key.
func TestWatchResumePointsOfTenants(t *testing.T) {
	auth := authFromFile(t, `{"principals": [
	  {"name": "dash-eu1", "role": "platform", "clusters": ["eu1"], "token_sha256": ["`+sha256hex("eu1-reader")+`"]},
	  {"name": "dash-eu1-b", "role": "platform", "clusters": ["eu1"], "token_sha256": ["`+sha256hex("eu1-reader-b")+`"]},
	  {"name": "ops", "role": "admin", "token_sha256": ["`+sha256hex("admin")+`"]}
	]}`)
	key := []byte("0123456789abcdef0123456789abcdef")
	ts := start(t, setup{opts: server.Options{Auth: auth, ResumeKey: key}})
	as := func(ts *testServer, token string) setpointv1.AutoscalerServiceClient {
		return ts.client(t, grpc.WithTransportCredentials(insecureCreds()), grpc.WithPerRPCCredentials(bearer(token)))
	}
	admin, reader, other := as(ts, "admin"), as(ts, "eu1-reader"), as(ts, "eu1-reader-b")
	points := func(s grpc.ServerStreamingClient[setpointv1.WatchResponse], n int) (revs []uint64, changes []string) {
		t.Helper()
		for _, c := range recv(t, s, n) {
			rev, rest, _ := strings.Cut(c, " ")
			r, err := strconv.ParseUint(rev, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			revs, changes = append(revs, r), append(changes, rest)
		}
		return revs, changes
	}

	ctx, cancel := context.WithCancel(t.Context())
	s, header := watch(t, ctx, reader, &setpointv1.WatchRequest{})
	sAdmin, _ := watch(t, ctx, admin, &setpointv1.WatchRequest{Cluster: "eu1"})
	recommendIn(t, admin, "eu1", "web", 1)
	recommendIn(t, admin, "eu2", "web", 1)
	recommendIn(t, admin, "eu2", "api", 1)
	recommendIn(t, admin, "eu1", "api", 2)
	seen, changes := points(s, 2)
	real, _ := points(sAdmin, 2)
	cancel()
	if d := cmp.Diff([]uint64{1, 4}, real); d != "" {
		t.Fatalf("admin's revisions (-want +got):\n%s", d)
	}
	for i, p := range append([]uint64{header}, seen...) {
		if p <= 4 || (i > 0 && p == real[i-1]) {
			t.Errorf("tenant's point %d = %d: a revision shows through", i, p)
		}
	}
	if d := cmp.Diff([]string{"eu1/shop/web decision 2", "eu1/shop/api decision 4"}, changes); d != "" {
		t.Errorf("tenant's changes (-want +got):\n%s", d)
	}

	// Missed while away: resuming from the first point gives the second
	// change, then a new one, and nothing else.
	recommendIn(t, admin, "eu1", "web", 3)
	s, h := watch(t, t.Context(), reader, &setpointv1.WatchRequest{ResumeAfter: seen[0]})
	if h != seen[0] {
		t.Errorf("header = %d, want the resume point %d", h, seen[0])
	}
	revs, changes := points(s, 2)
	if d := cmp.Diff([]string{"eu1/shop/api decision 4", "eu1/shop/web decision 5"}, changes); d != "" {
		t.Errorf("resumed changes (-want +got):\n%s", d)
	}
	if revs[0] != seen[1] {
		t.Errorf("the same change's point differs between streams: %d, %d", revs[0], seen[1])
	}

	refused := func(c setpointv1.AutoscalerServiceClient, after uint64) error {
		t.Helper()
		s, err := c.Watch(t.Context(), &setpointv1.WatchRequest{ResumeAfter: after})
		if err == nil {
			_, err = s.Recv()
		}
		return err
	}
	wantViolation(t, refused(other, seen[0]), "resume_after")    // another principal's
	wantViolation(t, refused(reader, seen[0]^1), "resume_after") // garbled
	wantViolation(t, refused(reader, 3), "resume_after")         // a bare revision

	// After a restart with the same key the point still resumes; under
	// another key it is refused.
	ts.stop(t)
	ts2 := start(t, setup{path: ts.path, opts: server.Options{Auth: auth, ResumeKey: key}})
	s, _ = watch(t, t.Context(), as(ts2, "eu1-reader"), &setpointv1.WatchRequest{ResumeAfter: revs[1]})
	recommendIn(t, as(ts2, "admin"), "eu1", "api", 1)
	if _, changes := points(s, 1); changes[0] != "eu1/shop/api decision 2" {
		t.Errorf("after restart: %v, want eu1/shop/api decision 2", changes)
	}
	ts2.stop(t)
	ts3 := start(t, setup{path: ts.path, opts: server.Options{Auth: auth, ResumeKey: []byte("another key of sixteen+ bytes")}})
	wantViolation(t, refused(as(ts3, "eu1-reader"), revs[1]), "resume_after")
}

// TestWatchPointIgnoresOthersWrites (issue 28, finding 11): the resume
// point a tenant is given depends only on the clusters it may read. While
// another tenant writes, the tenant's header point stays the same (it
// changed with every write of anyone's before) and resuming from it works
// even after the other's writes pushed every change it had seen out of
// the kept feed; a change of its own cluster moves it.
func TestWatchPointIgnoresOthersWrites(t *testing.T) {
	auth := authFromFile(t, `{"principals": [
	  {"name": "dash-eu1", "role": "platform", "clusters": ["eu1"], "token_sha256": ["`+sha256hex("eu1-reader")+`"]},
	  {"name": "ops", "role": "admin", "token_sha256": ["`+sha256hex("admin")+`"]}
	]}`)
	ts := start(t, setup{opts: server.Options{Auth: auth}, storeOpts: boltstore.Options{MaxChanges: 3}})
	as := func(token string) setpointv1.AutoscalerServiceClient {
		return ts.client(t, grpc.WithTransportCredentials(insecureCreds()), grpc.WithPerRPCCredentials(bearer(token)))
	}
	admin, reader := as("admin"), as("eu1-reader")
	header := func() uint64 {
		t.Helper()
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		_, p := watch(t, ctx, reader, &setpointv1.WatchRequest{})
		return p
	}
	recommendIn(t, admin, "eu1", "web", 1) // revision 1: the tenant's
	before := header()

	// The other tenant writes more than the feed keeps (3).
	for i := range 5 {
		recommendIn(t, admin, "eu2", fmt.Sprint("api-", i), i+1)
		if p := header(); p != before {
			t.Fatalf("after the other tenant's write %d the tenant's point is %d, was %d", i+1, p, before)
		}
	}
	s, h := watch(t, t.Context(), reader, &setpointv1.WatchRequest{ResumeAfter: before})
	if h != before {
		t.Errorf("resumed header = %d, want the resume point %d", h, before)
	}
	recommendIn(t, admin, "eu1", "api", 2) // revision 7: the tenant's own
	r, err := s.Recv()
	if err != nil {
		t.Fatalf("resuming from a point older than the kept feed, past only others' writes: %v", err)
	}
	if got := change(r); !strings.HasSuffix(got, " eu1/shop/api decision 4") {
		t.Errorf("resumed stream got %q, want eu1/shop/api decision 4", got)
	}
	if after := header(); after == before || after != r.GetRevision() {
		t.Errorf("after a change of its cluster the tenant's point is %d (was %d), want that change's %d", after, before, r.GetRevision())
	}
}
