package server_test

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/setpointhq/setpoint/internal/testpki"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"github.com/setpointhq/setpoint/server"
	"github.com/setpointhq/setpoint/store"
	"golang.org/x/net/http2"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// tokenAuth returns an Authenticator of two platform principals,
// "p1-token" and "p2-token", over plaintext.
func tokenAuth(t *testing.T) *server.Authenticator {
	t.Helper()
	return authFromFile(t, `{"principals": [
  {"name": "p1", "role": "platform", "clusters": ["*"], "token_sha256": ["`+sha256hex("p1-token")+`"]},
  {"name": "p2", "role": "platform", "clusters": ["*"], "token_sha256": ["`+sha256hex("p2-token")+`"]}
]}`)
}

// authFromFile returns an Authenticator of a principals file with content.
func authFromFile(t *testing.T, content string) *server.Authenticator {
	t.Helper()
	path := filepath.Join(t.TempDir(), "principals.json")
	testpki.WriteFile(t, path, []byte(content))
	a, err := server.NewAuthenticator(path, server.ReloadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestRateLimitTripsAndRecovers(t *testing.T) {
	ts := start(t, setup{opts: server.Options{Auth: tokenAuth(t), RateLimit: 1, RateBurst: 2}})
	list := func(token string) error {
		c := ts.client(t, grpc.WithTransportCredentials(insecureCreds()), grpc.WithPerRPCCredentials(bearer(token)))
		_, err := c.ListTargets(t.Context(), &setpointv1.ListTargetsRequest{})
		return err
	}
	// The burst passes, the next call is refused with a retry hint.
	for i := range 2 {
		if err := list("p1-token"); err != nil {
			t.Fatalf("call %d within the burst: %v", i, err)
		}
	}
	err := list("p1-token")
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("call over the burst: %v, want ResourceExhausted", err)
	}
	var hint *errdetails.RetryInfo
	for _, d := range status.Convert(err).Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			hint = ri
		}
	}
	if d := hint.GetRetryDelay().AsDuration(); hint == nil || d <= 0 || d > time.Second {
		t.Errorf("retry hint = %v, want (0, 1s]", hint)
	}
	// Another principal has its own bucket.
	if err := list("p2-token"); err != nil {
		t.Errorf("another principal: %v", err)
	}
	// Unauthenticated calls are refused before the limiter.
	if err := list("guess"); status.Code(err) != codes.Unauthenticated {
		t.Errorf("unknown token: %v, want Unauthenticated", err)
	}
	// After the hinted delay the bucket has a token again.
	ts.clock.Step(time.Second)
	if err := list("p1-token"); err != nil {
		t.Errorf("after the retry delay: %v", err)
	}
	if err := list("p1-token"); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("second call after one token refilled: %v, want ResourceExhausted", err)
	}
}

// A request over a limit is refused and the callers around it are served.
func TestOversizedRequestsAreRefusedAlone(t *testing.T) {
	tests := []struct {
		name string
		opts server.Options
		req  func() *setpointv1.RecommendRequest
		want codes.Code
	}{
		{"message larger than -max-recv-msg-size", server.Options{MaxRecvMsgSize: 64 << 10},
			func() *setpointv1.RecommendRequest { return request("big", 1000, t0) }, codes.ResourceExhausted},
		{"more pods than -max-pods-per-request", server.Options{MaxPodsPerRequest: 10},
			func() *setpointv1.RecommendRequest { return request("big", 11, t0) }, codes.InvalidArgument},
		{"more metrics than -max-metrics-per-request", server.Options{MaxMetricsPerRequest: 2},
			func() *setpointv1.RecommendRequest {
				r := request("big", 2, t0)
				for range 2 {
					r.Spec.Metrics = append(r.Spec.Metrics, r.Spec.Metrics[0])
					r.Observations = append(r.Observations, &setpointv1.MetricObservation{})
				}
				return r
			}, codes.InvalidArgument},
		{"within the limits", server.Options{MaxRecvMsgSize: 64 << 10, MaxPodsPerRequest: 10, MaxMetricsPerRequest: 2},
			func() *setpointv1.RecommendRequest { return request("big", 10, t0) }, codes.OK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts := start(t, setup{opts: tt.opts})
			conn := dial(t, ts.addr)
			shared, other := setpointv1.NewAutoscalerServiceClient(conn), ts.client(t)
			errs := make(chan error, 2)
			go func() { _, err := shared.Recommend(t.Context(), request("small-1", 2, t0)); errs <- err }()
			go func() { _, err := other.Recommend(t.Context(), request("small-2", 2, t0)); errs <- err }()
			_, err := shared.Recommend(t.Context(), tt.req())
			if status.Code(err) != tt.want {
				t.Errorf("the request: %v, want %v", err, tt.want)
			}
			for range 2 {
				if err := <-errs; err != nil {
					t.Errorf("a caller beside it: %v", err)
				}
			}
			// The connection that sent it still works.
			if _, err := shared.Recommend(t.Context(), request("small-3", 2, t0)); err != nil {
				t.Errorf("the same connection afterwards: %v", err)
			}
		})
	}
}

func TestRequestLimitNamesTheField(t *testing.T) {
	ts := start(t, setup{opts: server.Options{MaxPodsPerRequest: 3}})
	_, err := ts.client(t).Recommend(t.Context(), request("big", 4, t0))
	var fields []string
	for _, d := range status.Convert(err).Details() {
		if br, ok := d.(*errdetails.BadRequest); ok {
			for _, v := range br.GetFieldViolations() {
				fields = append(fields, v.GetField())
			}
		}
	}
	if len(fields) != 2 || fields[0] != "pods" || fields[1] != "resource_metrics.items" {
		t.Errorf("violations = %v, want pods and resource_metrics.items", fields)
	}
}

func TestMaxConcurrentStreams(t *testing.T) {
	fs := &faultStore{entered: make(chan struct{}), release: make(chan struct{})}
	ts := start(t, setup{opts: server.Options{MaxConcurrentStreams: 1}, wrap: func(s store.Store) store.Store { fs.Store = s; return fs }})
	c := ts.client(t)
	first := make(chan error, 1)
	go func() { _, err := c.Recommend(context.Background(), request("a", 2, t0)); first <- err }()
	<-fs.entered
	// The connection's one stream is taken: the next call waits.
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	if _, err := c.GetTarget(ctx, &setpointv1.GetTargetRequest{Target: key("a")}); status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("second call on the connection: %v, want DeadlineExceeded", err)
	}
	// Another connection is not affected.
	if _, err := ts.client(t).GetTarget(t.Context(), &setpointv1.GetTargetRequest{Target: key("a")}); status.Code(err) != codes.NotFound {
		t.Errorf("call on another connection: %v, want NotFound", err)
	}
	close(fs.release)
	if err := <-first; err != nil {
		t.Errorf("first call: %v", err)
	}
	if _, err := c.GetTarget(t.Context(), &setpointv1.GetTargetRequest{Target: key("a")}); err != nil {
		t.Errorf("call after the stream was freed: %v", err)
	}
}

// rawConn is a bare HTTP/2 client connection, to send what grpc-go's
// client never would (pings every few milliseconds).
func rawConn(t *testing.T, addr string) (*http2.Framer, net.Conn) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := c.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(c, c)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	if err := c.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	return fr, c
}

func TestKeepaliveEnforcement(t *testing.T) {
	tests := []struct {
		name    string
		minTime time.Duration
		goaway  bool
	}{
		{"pings more often than the minimum", time.Minute, true},
		{"pings within the minimum", time.Nanosecond, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts := start(t, setup{opts: server.Options{KeepaliveMinTime: tt.minTime}})
			fr, c := rawConn(t, ts.addr)
			for i := range 5 {
				if err := fr.WritePing(false, [8]byte{byte(i)}); err != nil {
					t.Fatal(err)
				}
			}
			if !tt.goaway {
				if err := c.SetDeadline(time.Now().Add(300 * time.Millisecond)); err != nil {
					t.Fatal(err)
				}
			}
			for {
				f, err := fr.ReadFrame()
				var ne net.Error
				switch {
				case !tt.goaway && errors.As(err, &ne) && ne.Timeout():
					return // still open
				case err != nil:
					t.Fatalf("connection ended: %v", err)
				}
				if ga, ok := f.(*http2.GoAwayFrame); ok {
					if !tt.goaway || ga.ErrCode != http2.ErrCodeEnhanceYourCalm {
						t.Errorf("GOAWAY %v, want one only for too many pings", ga.ErrCode)
					}
					return
				}
			}
		})
	}
}

func TestKeepaliveClosesDeadConnections(t *testing.T) {
	// The server pings after a second idle (grpc-go's floor) and gives up
	// 100 ms later; this client never answers.
	ts := start(t, setup{opts: server.Options{KeepaliveTime: time.Second, KeepaliveTimeout: 100 * time.Millisecond}})
	fr, _ := rawConn(t, ts.addr)
	pinged := false
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatal("the server kept a connection that does not answer pings")
			}
			break // closed
		}
		if p, ok := f.(*http2.PingFrame); ok && !p.IsAck() {
			pinged = true
		}
	}
	if !pinged {
		t.Error("the server closed the connection without pinging it")
	}
}
