package server_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"github.com/setpointhq/setpoint/server"
	"github.com/setpointhq/setpoint/store"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
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

// tokens: an agent of eu1, a reader of every cluster, an admin.
const tokens = `{"principals": [
  {"name": "agent-eu1", "role": "agent", "clusters": ["eu1"], "token": "agent-token"},
  {"name": "dashboard", "role": "reader", "clusters": ["*"], "token": "reader-token"},
  {"name": "ops", "role": "admin", "token_sha256": "` + adminSum + `"}
]}`

// adminSum is the SHA-256 of "admin-token".
const adminSum = "5db9c2a7a8f6a4b6f1e7d2cf2d0c5e3a3b0a1ef9b4f5dc4bb44e4b0b1c2f0e3d"

func TestAuth(t *testing.T) {
	tok, err := server.ParseTokens([]byte(strings.Replace(tokens, adminSum, sha256hex("admin-token"), 1)))
	if err != nil {
		t.Fatal(err)
	}
	ts := start(t, setup{opts: server.Options{Tokens: tok}})
	recommend := func(ctx context.Context, c setpointv1.AutoscalerServiceClient, cluster string) error {
		req := request("web", 2, t0)
		req.Target.Cluster = cluster
		_, err := c.Recommend(ctx, req)
		return err
	}
	tests := []struct {
		name  string
		token string
		call  func(context.Context, setpointv1.AutoscalerServiceClient) error
		want  codes.Code
	}{
		{"no token", "", func(ctx context.Context, c setpointv1.AutoscalerServiceClient) error { return recommend(ctx, c, "eu1") }, codes.Unauthenticated},
		{"unknown token", "guess", func(ctx context.Context, c setpointv1.AutoscalerServiceClient) error { return recommend(ctx, c, "eu1") }, codes.Unauthenticated},
		{"agent in its cluster", "agent-token", func(ctx context.Context, c setpointv1.AutoscalerServiceClient) error { return recommend(ctx, c, "eu1") }, codes.OK},
		{"agent in another cluster", "agent-token", func(ctx context.Context, c setpointv1.AutoscalerServiceClient) error { return recommend(ctx, c, "us1") }, codes.PermissionDenied},
		{"agent reads", "agent-token", func(ctx context.Context, c setpointv1.AutoscalerServiceClient) error {
			_, err := c.GetTarget(ctx, &setpointv1.GetTargetRequest{Target: key("web")})
			return err
		}, codes.PermissionDenied},
		{"reader reads", "reader-token", func(ctx context.Context, c setpointv1.AutoscalerServiceClient) error {
			_, err := c.GetTarget(ctx, &setpointv1.GetTargetRequest{Target: key("web")})
			return err
		}, codes.OK},
		{"reader lists", "reader-token", func(ctx context.Context, c setpointv1.AutoscalerServiceClient) error {
			_, err := c.ListTargets(ctx, &setpointv1.ListTargetsRequest{})
			return err
		}, codes.OK},
		{"reader recommends", "reader-token", func(ctx context.Context, c setpointv1.AutoscalerServiceClient) error { return recommend(ctx, c, "eu1") }, codes.PermissionDenied},
		{"reader deletes", "reader-token", func(ctx context.Context, c setpointv1.AutoscalerServiceClient) error {
			_, err := c.DeleteTarget(ctx, &setpointv1.DeleteTargetRequest{Target: key("web")})
			return err
		}, codes.PermissionDenied},
		{"admin recommends anywhere", "admin-token", func(ctx context.Context, c setpointv1.AutoscalerServiceClient) error { return recommend(ctx, c, "us1") }, codes.OK},
		{"admin deletes", "admin-token", func(ctx context.Context, c setpointv1.AutoscalerServiceClient) error {
			_, err := c.DeleteTarget(ctx, &setpointv1.DeleteTargetRequest{Target: key("web")})
			return err
		}, codes.OK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := []grpc.DialOption{grpc.WithTransportCredentials(insecureCreds())}
			if tt.token != "" {
				opts = append(opts, grpc.WithPerRPCCredentials(bearer(tt.token)))
			}
			if err := tt.call(t.Context(), ts.client(t, opts...)); status.Code(err) != tt.want {
				t.Errorf("err = %v, want %v", err, tt.want)
			}
		})
	}
	// Health needs no token.
	h := healthpb.NewHealthClient(dial(t, ts.addr))
	if _, err := h.Check(t.Context(), &healthpb.HealthCheckRequest{}); err != nil {
		t.Errorf("health without a token: %v", err)
	}
}

// faultStore wraps the real store: Update waits for release when block is
// set, Get panics when panicking is set.
type faultStore struct {
	store.Store
	entered chan struct{}
	release chan struct{}
	panics  bool
}

func (f *faultStore) Update(ctx context.Context, k store.Key, fn func(*store.Record) error) (store.Record, error) {
	if f.release != nil {
		f.entered <- struct{}{}
		<-f.release
	}
	return f.Store.Update(ctx, k, fn)
}

func (f *faultStore) Get(ctx context.Context, k store.Key) (store.Record, error) {
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
	ts.stop()
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
	_ = stream.CloseSend()
	var names []string
	for _, s := range resp.GetListServicesResponse().GetService() {
		names = append(names, s.GetName())
	}
	if !strings.Contains(strings.Join(names, ","), "setpoint.v1.AutoscalerService") {
		t.Errorf("reflection lists %v, want setpoint.v1.AutoscalerService", names)
	}
}

func TestExpiry(t *testing.T) {
	ts := start(t, setup{opts: server.Options{ExpireAfter: time.Hour, ExpireInterval: 5 * time.Millisecond}})
	c := ts.client(t)
	if _, err := c.Recommend(t.Context(), request("web", 2, t0)); err != nil {
		t.Fatal(err)
	}
	ts.clock.Step(2 * time.Hour)
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		_, err := c.GetTarget(t.Context(), &setpointv1.GetTargetRequest{Target: key("web")})
		if status.Code(err) == codes.NotFound {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Error("target not expired")
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

func TestTLS(t *testing.T) {
	ca, serverCert, clientCert := testPKI(t)
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	ts := start(t, setup{opts: server.Options{TLS: &tls.Config{
		Certificates: []tls.Certificate{serverCert}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS13,
	}}})
	c := ts.client(t, withTLS(&tls.Config{RootCAs: pool, Certificates: []tls.Certificate{clientCert}, ServerName: "localhost", MinVersion: tls.VersionTLS13}))
	if _, err := c.Recommend(t.Context(), request("web", 2, t0)); err != nil {
		t.Errorf("Recommend over mTLS: %v", err)
	}
	noCert := ts.client(t, withTLS(&tls.Config{RootCAs: pool, ServerName: "localhost", MinVersion: tls.VersionTLS13}))
	if _, err := noCert.Recommend(t.Context(), request("web", 2, t0)); status.Code(err) != codes.Unavailable {
		t.Errorf("Recommend without a client certificate: %v, want Unavailable", err)
	}
}

// testPKI returns a throwaway CA, a server certificate for localhost and
// 127.0.0.1, and a client certificate, all signed by the CA.
func testPKI(t *testing.T) (*x509.Certificate, tls.Certificate, tls.Certificate) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	leaf := func(serial int64, usage x509.ExtKeyUsage) tls.Certificate {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "localhost"},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	}
	return ca, leaf(2, x509.ExtKeyUsageServerAuth), leaf(3, x509.ExtKeyUsageClientAuth)
}
