package server_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/setpointhq/setpoint/internal/testkit"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"github.com/setpointhq/setpoint/server"
	"github.com/setpointhq/setpoint/store"
	"github.com/setpointhq/setpoint/store/boltstore"
	"github.com/setpointhq/setpoint/target"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

func TestRecommendObserveGet(t *testing.T) {
	ts := start(t, setup{})
	c := ts.client(t)
	ctx := t.Context()

	resp, err := c.Recommend(ctx, request("web", 4, ts.clock.Now()))
	if err != nil {
		t.Fatal(err)
	}
	d := resp.GetDecision()
	// 400m of 500m is 80% against a 50% target: ceil(4 × 1.6) = 7.
	if d.GetDesiredReplicas() != 7 || !d.GetRescale() || d.GetDecisionId() == "" {
		t.Fatalf("decision = %v, want a rescale to 7", d)
	}
	if got := d.GetExplanation().GetMetrics(); len(got) != 1 || got[0].GetProposal() != 7 {
		t.Errorf("explanation metrics = %v, want one proposing 7", got)
	}
	if got := d.GetStatus().GetCurrentMetrics(); len(got) != 1 || got[0].GetResource().GetCurrent().GetAverageValue() != "400m" {
		t.Errorf("current metrics = %v, want cpu at 400m", got)
	}

	ts.clock.Step(time.Second)
	if _, err := c.Observe(ctx, &setpointv1.ObserveRequest{Target: key("web"), DecisionId: d.GetDecisionId(),
		Change: &setpointv1.ObserveRequest_Applied{Applied: &setpointv1.AppliedChange{From: 4, To: 7}}}); err != nil {
		t.Fatal(err)
	}
	// A retried observation is recorded once.
	if _, err := c.Observe(ctx, &setpointv1.ObserveRequest{Target: key("web"), DecisionId: d.GetDecisionId(),
		Change: &setpointv1.ObserveRequest_Applied{Applied: &setpointv1.AppliedChange{From: 4, To: 7}}}); err != nil {
		t.Fatal(err)
	}
	got, err := c.GetTarget(ctx, &setpointv1.GetTargetRequest{Target: key("web")})
	if err != nil {
		t.Fatal(err)
	}
	tg := got.GetTarget()
	// The first decision also records the current count, as upstream does.
	if n := len(tg.GetHistory().GetRecommendations()); n != 2 {
		t.Errorf("recommendations = %d, want 2", n)
	}
	if ups := tg.GetHistory().GetScaleUpEvents(); len(ups) != 1 || ups[0].GetChange() != 3 {
		t.Errorf("scale-up events = %v, want one of +3", ups)
	}
	if ev := tg.GetEvents(); len(ev) != 1 || ev[0].GetKind() != "Applied" {
		t.Errorf("events = %v, want one Applied", ev)
	}
	if tg.GetLastDecision().GetDecisionId() != d.GetDecisionId() || tg.GetSpec().GetScaleTargetRef().GetKind() != "Deployment" {
		t.Errorf("target = %v", tg)
	}
	if w := tg.GetSpec().GetBehavior().GetScaleDown().GetStabilizationWindowSeconds(); w != 300 {
		t.Errorf("stored scale-down window = %d, want the resolved default 300", w)
	}
	// The spec as received comes back as it was sent: no defaults added.
	if sent := request("web", 4, ts.clock.Now()).GetSpec(); !proto.Equal(tg.GetReceivedSpec(), sent) {
		t.Errorf("received spec = %v, want the spec sent, %v", tg.GetReceivedSpec(), sent)
	}
	if w := tg.GetReceivedSpec().GetBehavior().GetScaleDown(); w != nil {
		t.Errorf("received spec has a scale-down rule the request did not send: %v", w)
	}

	// A failed rescale of the next decision keeps the previous desired count.
	ts.clock.Step(time.Minute)
	resp, err = c.Recommend(ctx, request("web", 7, ts.clock.Now()))
	if err != nil {
		t.Fatal(err)
	}
	obs, err := c.Observe(ctx, &setpointv1.ObserveRequest{Target: key("web"), DecisionId: resp.GetDecision().GetDecisionId(),
		Change: &setpointv1.ObserveRequest_Failed{Failed: &setpointv1.FailedChange{To: resp.GetDecision().GetDesiredReplicas(), Message: "conflict"}}})
	if err != nil {
		t.Fatal(err)
	}
	if !hasCondition(obs.GetStatus(), "AbleToScale", "False", "FailedUpdateScale") {
		t.Errorf("status after failure = %v, want AbleToScale=False/FailedUpdateScale", obs.GetStatus())
	}
	// A failure reported for a superseded decision is refused.
	_, err = c.Observe(ctx, &setpointv1.ObserveRequest{Target: key("web"), DecisionId: d.GetDecisionId(),
		Change: &setpointv1.ObserveRequest_Failed{Failed: &setpointv1.FailedChange{To: 7}}})
	if status.Code(err) != codes.FailedPrecondition {
		t.Errorf("stale failure: %v, want FailedPrecondition", err)
	}

	list, err := c.ListTargets(ctx, &setpointv1.ListTargetsRequest{Cluster: "eu1"})
	if err != nil || len(list.GetTargets()) != 1 {
		t.Fatalf("ListTargets = %v, %v; want one target", list, err)
	}
	if _, err := c.DeleteTarget(ctx, &setpointv1.DeleteTargetRequest{Target: key("web")}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetTarget(ctx, &setpointv1.GetTargetRequest{Target: key("web")}); status.Code(err) != codes.NotFound {
		t.Errorf("GetTarget after delete: %v, want NotFound", err)
	}
}

func hasCondition(s *setpointv1.HorizontalPodAutoscalerStatus, typ, st, reason string) bool {
	for _, c := range s.GetConditions() {
		if c.GetType() == typ && c.GetStatus() == st && c.GetReason() == reason {
			return true
		}
	}
	return false
}

func TestInvalidArgumentNamesTheField(t *testing.T) {
	tests := []struct {
		name  string
		call  func(context.Context, setpointv1.AutoscalerServiceClient) error
		field string
	}{
		{"quantity", func(ctx context.Context, c setpointv1.AutoscalerServiceClient) error {
			req := request("web", 2, t0)
			req.Spec.Metrics[0].Resource.Target.AverageValue = "lots"
			_, err := c.Recommend(ctx, req)
			return err
		}, "spec.metrics[0].resource.target.average_value"},
		{"missing target (interceptor)", func(ctx context.Context, c setpointv1.AutoscalerServiceClient) error {
			req := request("web", 2, t0)
			req.Target.Cluster = ""
			_, err := c.Recommend(ctx, req)
			return err
		}, "target.cluster"},
		{"page size", func(ctx context.Context, c setpointv1.AutoscalerServiceClient) error {
			_, err := c.ListTargets(ctx, &setpointv1.ListTargetsRequest{PageSize: -1})
			return err
		}, "page_size"},
		{"observe without change", func(ctx context.Context, c setpointv1.AutoscalerServiceClient) error {
			_, err := c.Observe(ctx, &setpointv1.ObserveRequest{Target: key("web")})
			return err
		}, "change"},
	}
	ts := start(t, setup{})
	c := ts.client(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call(t.Context(), c)
			if status.Code(err) != codes.InvalidArgument {
				t.Fatalf("err = %v, want InvalidArgument", err)
			}
			for _, d := range status.Convert(err).Details() {
				if br, ok := d.(*errdetails.BadRequest); ok {
					for _, v := range br.GetFieldViolations() {
						if v.GetField() == tt.field {
							return
						}
					}
					t.Fatalf("BadRequest %v does not name %s", br, tt.field)
				}
			}
			t.Fatalf("no BadRequest detail in %v", err)
		})
	}
}

// faultStore wraps the real store: Update and Decide wait for release when
// release is set, Get panics when panics is set.
type faultStore struct {
	store.Store
	entered chan struct{}
	release chan struct{}
	panics  bool
}

func (f *faultStore) Update(ctx context.Context, k target.Key, fn func(*target.Record) error) (target.Record, error) {
	f.block()
	return f.Store.Update(ctx, k, fn)
}

func (f *faultStore) Decide(ctx context.Context, k target.Key, fn func(*target.Record) error) (target.Record, error) {
	f.block()
	return f.Store.Decide(ctx, k, fn)
}

// block says a write entered and waits for release, when release is set.
func (f *faultStore) block() {
	if f.release != nil {
		f.entered <- struct{}{}
		<-f.release
	}
}

func (f *faultStore) Get(ctx context.Context, k target.Key) (target.Record, error) {
	if f.panics {
		panic("secret panic text")
	}
	return f.Store.Get(ctx, k)
}

func TestResourceExhausted(t *testing.T) {
	fs := &faultStore{entered: make(chan struct{}), release: make(chan struct{})}
	ts := start(t, setup{opts: server.Options{MaxInFlightRecommends: 1}, wrap: func(s store.Store) store.Store { fs.Store = s; return fs }})
	c := ts.client(t)
	first := make(chan error, 1)
	go func() {
		_, err := c.Recommend(context.Background(), request("a", 2, t0))
		first <- err
	}()
	<-fs.entered
	_, err := c.Recommend(t.Context(), request("b", 2, t0))
	if status.Code(err) != codes.ResourceExhausted {
		t.Errorf("second Recommend: %v, want ResourceExhausted", err)
	}
	close(fs.release)
	if err := <-first; err != nil {
		t.Errorf("first Recommend: %v", err)
	}
}

func TestPanicIsInternalWithoutItsText(t *testing.T) {
	ts := start(t, setup{wrap: func(s store.Store) store.Store { return &faultStore{Store: s, panics: true} }})
	_, err := ts.client(t).GetTarget(t.Context(), &setpointv1.GetTargetRequest{Target: key("web")})
	if status.Code(err) != codes.Internal {
		t.Fatalf("err = %v, want Internal", err)
	}
	if strings.Contains(err.Error(), "secret") {
		t.Errorf("error %q leaks the panic", err)
	}
	// The server survives.
	if _, err := ts.client(t).Recommend(t.Context(), request("web", 2, t0)); err != nil {
		t.Errorf("Recommend after panic: %v", err)
	}
}

func TestConcurrentRecommendsAreSerialized(t *testing.T) {
	ts := start(t, setup{})
	c := ts.client(t)
	const n = 16
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Go(func() {
			_, err := c.Recommend(t.Context(), request("web", 3, t0))
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	got, err := c.GetTarget(t.Context(), &setpointv1.GetTargetRequest{Target: key("web")})
	if err != nil {
		t.Fatal(err)
	}
	// One per call, and the current count recorded by the first.
	if r := len(got.GetTarget().GetHistory().GetRecommendations()); r != n+1 {
		t.Errorf("recommendations = %d, want %d (one per call + the initial one)", r, n+1)
	}
}

func TestRestartKeepsHistory(t *testing.T) {
	ts := start(t, setup{})
	for i := range 3 {
		if _, err := ts.client(t).Recommend(t.Context(), request("web", 2, t0)); err != nil {
			t.Fatalf("Recommend %d: %v", i, err)
		}
	}
	ts.stop(t)
	again := start(t, setup{path: ts.path})
	got, err := again.client(t).GetTarget(t.Context(), &setpointv1.GetTargetRequest{Target: key("web")})
	if err != nil {
		t.Fatal(err)
	}
	if r := len(got.GetTarget().GetHistory().GetRecommendations()); r != 4 {
		t.Errorf("recommendations after restart = %d, want 4 (3 + the initial one)", r)
	}
}

func TestHealthAndReflection(t *testing.T) {
	ts := start(t, setup{})
	conn := dial(t, ts.addr)
	h, err := healthpb.NewHealthClient(conn).Check(t.Context(), &healthpb.HealthCheckRequest{Service: "setpoint.v1.AutoscalerService"})
	if err != nil || h.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("health = %v, %v; want SERVING", h, err)
	}
	stream, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range resp.GetListServicesResponse().GetService() {
		names = append(names, s.GetName())
	}
	for _, want := range []string{"setpoint.v1.AutoscalerService", "setpoint.v1.AdminService", "setpoint.console.v1.SessionService"} {
		if !slices.Contains(names, want) {
			t.Errorf("reflection lists %v, want %s", names, want)
		}
	}
	// Reflection describes every service it lists: each has a .proto.
	for _, name := range names {
		if err := stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_FileContainingSymbol{FileContainingSymbol: name}}); err != nil {
			t.Fatal(err)
		}
		resp, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if e := resp.GetErrorResponse(); e != nil || len(resp.GetFileDescriptorResponse().GetFileDescriptorProto()) == 0 {
			t.Errorf("reflection cannot describe %s: %v", name, e)
		}
	}
	_ = stream.CloseSend()
}

// expiryProbe is a store whose Expire passes are recorded (their
// cutoffs) and whose first pass fails.
type expiryProbe struct {
	store.Store
	mu      sync.Mutex
	cutoffs []time.Time
}

func (p *expiryProbe) Expire(ctx context.Context, cutoff time.Time) (int, error) {
	p.mu.Lock()
	p.cutoffs = append(p.cutoffs, cutoff)
	first := len(p.cutoffs) == 1
	p.mu.Unlock()
	if first {
		return 0, errors.New("an injected failure of the first pass")
	}
	return p.Store.Expire(ctx, cutoff)
}

// TestExpiry: the server's expiry loop (the only one) removes the targets
// not seen for ExpireAfter by its own clock and keeps the others; a failed
// pass is followed by the next.
func TestExpiry(t *testing.T) {
	probe := &expiryProbe{}
	ts := start(t, setup{opts: server.Options{ExpireAfter: time.Hour, ExpireInterval: 5 * time.Millisecond},
		wrap: func(st store.Store) store.Store { probe.Store = st; return probe }})
	c := ts.client(t)
	if _, err := c.Recommend(t.Context(), request("web", 2, t0)); err != nil {
		t.Fatal(err)
	}
	ts.clock.Step(2 * time.Hour)
	if _, err := c.Recommend(t.Context(), request("api", 2, ts.clock.Now())); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 5*time.Second, "the idle target to expire", func() error {
		_, err := c.GetTarget(t.Context(), &setpointv1.GetTargetRequest{Target: key("web")})
		if status.Code(err) == codes.NotFound {
			return nil
		}
		return fmt.Errorf("GetTarget: %v", err)
	})
	if _, err := c.GetTarget(t.Context(), &setpointv1.GetTargetRequest{Target: key("api")}); err != nil {
		t.Errorf("the target seen within ExpireAfter: %v", err)
	}
	probe.mu.Lock()
	defer probe.mu.Unlock()
	if last := probe.cutoffs[len(probe.cutoffs)-1]; !last.Equal(ts.clock.Now().Add(-time.Hour)) {
		t.Errorf("the last pass's cutoff is %v, want the server's clock less ExpireAfter, %v", last, ts.clock.Now().Add(-time.Hour))
	}
}

// TestExpiryAtStart: a server restarted more often than its expiry
// interval still expires: a pass runs as it starts.
func TestExpiryAtStart(t *testing.T) {
	ts := start(t, setup{})
	if _, err := ts.client(t).Recommend(t.Context(), request("web", 2, t0)); err != nil {
		t.Fatal(err)
	}
	ts.stop(t)
	later := testkit.NewClock(t0.Add(2 * time.Hour))
	ts2 := start(t, setup{path: ts.path, opts: server.Options{Now: later.Now, ExpireAfter: time.Hour, ExpireInterval: time.Hour}})
	testkit.Eventually(t, 5*time.Second, "the idle target to expire as the server starts", func() error {
		_, err := ts2.client(t).GetTarget(t.Context(), &setpointv1.GetTargetRequest{Target: key("web")})
		if status.Code(err) == codes.NotFound {
			return nil
		}
		return fmt.Errorf("GetTarget: %v", err)
	})
}

func TestMetricsEndpoint(t *testing.T) {
	ts := start(t, setup{})
	if _, err := ts.client(t).Recommend(t.Context(), request("web", 2, t0)); err != nil {
		t.Fatal(err)
	}
	h := httptest.NewServer(ts.srv.MetricsHandler())
	defer h.Close()
	resp, err := http.Get(h.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(b), `grpc_server_handled_total{grpc_code="OK",grpc_method="Recommend",grpc_service="setpoint.v1.AutoscalerService",grpc_type="unary"} 1`) {
		t.Errorf("metrics lack grpc_server_handled_total for Recommend:\n%.2000s", b)
	}
}

// brokenFeed is a store whose change feed cannot be read.
type brokenFeed struct{ store.Store }

func (brokenFeed) Revision(context.Context) (uint64, error) {
	return 0, errors.New("feed unavailable")
}

// TestNewNeedsAFollowableStore: a server without a store, or over a store
// whose change feed cannot be followed, is a construction error, not a
// server whose Watch and feed metrics are silently missing.
func TestNewNeedsAFollowableStore(t *testing.T) {
	st, err := boltstore.Open(filepath.Join(t.TempDir(), "s.db"), boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for name, s := range map[string]store.Store{"nil": nil, "broken feed": brokenFeed{st}} {
		if srv, err := server.New(s, server.Options{}); err == nil || srv != nil {
			t.Errorf("New(%s) = %v, %v; want an error", name, srv, err)
		}
	}
	if _, err := server.New(st, server.Options{}); err != nil {
		t.Errorf("New over a Bolt store: %v", err)
	}
}
