package server_test

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"testing"
	"time"

	"github.com/setpointhq/setpoint/internal/servertest"
	"github.com/setpointhq/setpoint/internal/testkit"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"github.com/setpointhq/setpoint/server"
	"github.com/setpointhq/setpoint/store"
	"github.com/setpointhq/setpoint/store/boltstore"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// t0 is the test clock's start.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// testServer is a running server on a real TCP listener over a real bbolt
// file, with a clock the test steps (unless setup set Options.Now).
type testServer struct {
	*servertest.Server
	addr  string
	path  string
	store store.Store
	clock *testkit.Clock
	srv   *server.Server
}

// stop shuts the server down and closes its store, failing the test on an
// error; it is also done when the test ends.
func (ts *testServer) stop(t testing.TB) {
	t.Helper()
	if err := ts.Stop(); err != nil {
		t.Error(err)
	}
}

// setup configures a test server before it starts.
type setup struct {
	opts server.Options
	// wrap, when set, wraps the real store (to inject faults).
	wrap func(store.Store) store.Store
	// path is the store file; a new one in t.TempDir() when empty.
	path string
	// storeOpts configure the bbolt store.
	storeOpts boltstore.Options
}

// start runs a server until the test ends (or stop is called).
func start(t testing.TB, su setup) *testServer {
	t.Helper()
	c := testkit.NewClock(t0)
	if su.opts.Now == nil {
		su.opts.Now = c.Now
	}
	s := servertest.Start(t, servertest.Config{Path: su.path, Store: su.storeOpts, Wrap: su.wrap, Options: su.opts})
	return &testServer{Server: s, addr: s.Addr, path: s.Path, store: s.Store, clock: c, srv: s.Server}
}

// dial returns a client of the server, closed when the test ends.
func dial(t testing.TB, addr string, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	if len(opts) == 0 {
		opts = []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	}
	conn, err := grpc.NewClient(addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// client returns an AutoscalerService client of the server.
func (ts *testServer) client(t testing.TB, opts ...grpc.DialOption) setpointv1.AutoscalerServiceClient {
	return setpointv1.NewAutoscalerServiceClient(dial(t, ts.addr, opts...))
}

// withTLS dials with TLS configured by cfg.
func withTLS(cfg *tls.Config) grpc.DialOption {
	return grpc.WithTransportCredentials(credentials.NewTLS(cfg))
}

// bearer is per-RPC bearer-token credentials that also work without TLS.
type bearer string

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}
func (bearer) RequireTransportSecurity() bool { return false }

// key is the target key of name in cluster eu1.
func key(name string) *setpointv1.TargetKey {
	return &setpointv1.TargetKey{Cluster: "eu1", Namespace: "shop", Name: name}
}

// request is a Recommend request for target name with n running pods, each
// requesting 500m cpu and using 400m against a 50% utilization target (the
// decision is to scale up), taken at now.
func request(name string, n int, now time.Time) *setpointv1.RecommendRequest {
	req := &setpointv1.RecommendRequest{
		Target: key(name),
		Spec: &setpointv1.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: &setpointv1.CrossVersionObjectReference{ApiVersion: "apps/v1", Kind: "Deployment", Name: name},
			MinReplicas:    testkit.Ptr[int32](1),
			MaxReplicas:    100,
			Metrics: []*setpointv1.MetricSpec{{Type: "Resource", Resource: &setpointv1.ResourceMetricSource{
				Name: "cpu", Target: &setpointv1.MetricTarget{Type: "Utilization", AverageUtilization: testkit.Ptr[int32](50)}}}},
			Behavior: &setpointv1.HorizontalPodAutoscalerBehavior{},
		},
		Scale:           &setpointv1.Scale{Replicas: int32(n), StatusReplicas: int32(n), Selector: "app=" + name},
		ResourceMetrics: &setpointv1.ResourceMetrics{},
		Observations:    []*setpointv1.MetricObservation{{}},
	}
	for i := range n {
		pod := fmt.Sprintf("%s-%d", name, i)
		start := timestamppb.New(now.Add(-time.Hour))
		req.Pods = append(req.Pods, &setpointv1.Pod{
			Name: pod, Phase: "Running", StartTime: start,
			Ready:      &setpointv1.PodReadyCondition{Status: "True", LastTransitionTime: start},
			Containers: []*setpointv1.Container{{Name: "app", Requests: map[string]string{"cpu": "500m"}}},
		})
		req.ResourceMetrics.Items = append(req.ResourceMetrics.Items, &setpointv1.PodMetrics{
			Pod: pod, Timestamp: timestamppb.New(now.Add(-15 * time.Second)), Window: durationpb.New(30 * time.Second),
			Containers: []*setpointv1.ContainerMetrics{{Name: "app", Usage: map[string]string{"cpu": "400m"}}},
		})
	}
	return req
}

// insecureCreds are plaintext transport credentials.
func insecureCreds() credentials.TransportCredentials { return insecure.NewCredentials() }

// sha256hex returns the hex SHA-256 of s.
func sha256hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}
