package setpointclient_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/setpointhq/setpoint/internal/testpki"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"github.com/setpointhq/setpoint/server"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	setpointclient "github.com/setpointhq/setpoint/clients/go"
	"github.com/setpointhq/setpoint/clients/go/endpoints"
)

func TestDialRefusesPlaintextTokensOffLoopback(t *testing.T) {
	tests := []struct {
		addr string
		opts setpointclient.Options
		ok   bool
	}{
		{"127.0.0.1:7443", setpointclient.Options{Token: "t"}, true},
		{"localhost:7443", setpointclient.Options{Token: "t"}, true},
		{"[::1]:7443", setpointclient.Options{Token: "t"}, true},
		{"setpoint.example:7443", setpointclient.Options{}, true},
		{"setpoint.example:7443", setpointclient.Options{Token: "t"}, false},
		{"setpoint.example:7443", setpointclient.Options{Token: "t", TLS: &tls.Config{MinVersion: tls.VersionTLS12}}, true},
		{"127.0.0.1:7443,127.0.0.1:7444", setpointclient.Options{Token: "t"}, true},
		{"127.0.0.1:7443,setpoint.example:7443", setpointclient.Options{Token: "t"}, false},
		{"a.example:7443,b.example:7443", setpointclient.Options{Token: "t", TLS: &tls.Config{MinVersion: tls.VersionTLS12}}, true},
		{"dns:///setpoint-headless.setpoint-system:7443", setpointclient.Options{}, true},
		// A list names host:port, nothing else.
		{"a.example:7443,b.example", setpointclient.Options{}, false},
		{"a.example:7443,", setpointclient.Options{}, false},
		{"", setpointclient.Options{}, false},
	}
	for _, tt := range tests {
		c, err := setpointclient.Dial(tt.addr, tt.opts)
		if (err == nil) != tt.ok {
			t.Errorf("Dial(%s, token=%v, tls=%v) = %v, want ok=%v", tt.addr, tt.opts.Token != "", tt.opts.TLS != nil, err, tt.ok)
		}
		if c != nil {
			c.Close()
		}
	}
}

func TestTLSFiles(t *testing.T) {
	if _, err := (setpointclient.TLSFiles{Cert: "c.pem"}).Config(); err == nil {
		t.Error("a certificate without a key was accepted")
	}
	if _, err := (setpointclient.TLSFiles{CA: "missing.pem"}).Config(); err == nil {
		t.Error("a missing CA file was accepted")
	}
}

// flaky answers GetTarget and Recommend with UNAVAILABLE until fails
// calls have failed, and records each call's deadline.
type flaky struct {
	setpointv1.UnimplementedAutoscalerServiceServer
	fails    int
	calls    map[string]int
	deadline time.Duration
	mu       sync.Mutex
}

func (f *flaky) answer(ctx context.Context, method string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[method]++
	if d, ok := ctx.Deadline(); ok {
		f.deadline = time.Until(d)
	}
	if f.calls[method] <= f.fails {
		return status.Error(codes.Unavailable, "not yet")
	}
	return nil
}

func (f *flaky) GetTarget(ctx context.Context, _ *setpointv1.GetTargetRequest) (*setpointv1.GetTargetResponse, error) {
	return &setpointv1.GetTargetResponse{}, f.answer(ctx, "GetTarget")
}

func (f *flaky) Recommend(ctx context.Context, _ *setpointv1.RecommendRequest) (*setpointv1.RecommendResponse, error) {
	return &setpointv1.RecommendResponse{}, f.answer(ctx, "Recommend")
}

// serveGRPC serves the registered services on loopback for the test.
func serveGRPC(t *testing.T, register func(*grpc.Server)) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	register(s)
	go s.Serve(lis)
	t.Cleanup(s.Stop)
	return lis.Addr().String()
}

// TestServiceConfig: reads are retried on UNAVAILABLE, writes are not, and
// every call carries the default deadline.
func TestServiceConfig(t *testing.T) {
	f := &flaky{fails: 2, calls: map[string]int{}}
	addr := serveGRPC(t, func(s *grpc.Server) { setpointv1.RegisterAutoscalerServiceServer(s, f) })
	c, err := setpointclient.Dial(addr, setpointclient.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	if _, err := c.GetTarget(t.Context(), &setpointv1.GetTargetRequest{}); err != nil {
		t.Errorf("GetTarget after 2 UNAVAILABLE answers: %v", err)
	}
	if _, err := c.Recommend(t.Context(), &setpointv1.RecommendRequest{}); status.Code(err) != codes.Unavailable {
		t.Errorf("Recommend: %v, want UNAVAILABLE without a retry", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if diff := cmp.Diff(map[string]int{"GetTarget": 3, "Recommend": 1}, f.calls); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
	if f.deadline <= 5*time.Second || f.deadline > 10*time.Second {
		t.Errorf("deadline seen by the server = %v, want the default 10s", f.deadline)
	}
}

// TestServiceConfigNames: the default service config parses and names
// only methods the API has.
func TestServiceConfigNames(t *testing.T) {
	var sc struct {
		MethodConfig []struct {
			Name []struct{ Service, Method string }
		}
	}
	if err := json.Unmarshal([]byte(setpointclient.DefaultServiceConfig), &sc); err != nil {
		t.Fatal(err)
	}
	for _, mc := range sc.MethodConfig {
		for _, n := range mc.Name {
			d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(n.Service))
			if err != nil {
				t.Errorf("service %s: %v", n.Service, err)
				continue
			}
			if d.(protoreflect.ServiceDescriptor).Methods().ByName(protoreflect.Name(n.Method)) == nil {
				t.Errorf("%s has no method %s", n.Service, n.Method)
			}
		}
	}
}

// The default service config balances as endpoints.Balanced says.
func TestServiceConfigBalances(t *testing.T) {
	type balancing struct {
		LoadBalancingConfig []map[string]any
		HealthCheckConfig   map[string]any
	}
	var want, got balancing
	if err := json.Unmarshal([]byte(endpoints.Balanced), &want); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(setpointclient.DefaultServiceConfig), &got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" || len(got.LoadBalancingConfig) == 0 {
		t.Errorf("DefaultServiceConfig's balancing (-endpoints.Balanced +got):\n%s", diff)
	}
}

// TestMutualTLSAndToken dials a real server that requires a client
// certificate and a bearer token.
func TestMutualTLSAndToken(t *testing.T) {
	dir := t.TempDir()
	ca, err := testpki.NewCA("setpoint-test-ca")
	if err != nil {
		t.Fatal(err)
	}
	serving, err := ca.Sign(testpki.Leaf{CommonName: "setpoint", Server: true, DNSNames: []string{"setpoint.test"}, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}})
	if err != nil {
		t.Fatal(err)
	}
	servingCert := serving.Cert
	client, err := ca.Sign(testpki.Leaf{CommonName: "platform"})
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile, err := client.WriteFiles(dir, "client")
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, ca.PEM, 0o600); err != nil {
		t.Fatal(err)
	}
	principals := filepath.Join(dir, "principals.json")
	sum := sha256.Sum256([]byte("s3cret"))
	if err := os.WriteFile(principals, []byte(`{"principals": [{"name": "ops", "role": "admin", "token_sha256": ["`+hex.EncodeToString(sum[:])+`"]}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	auth, err := server.NewAuthenticator(principals, server.ReloadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	addr := startServer(t, server.Options{Auth: auth, TLS: &tls.Config{
		MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{servingCert},
		ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: ca.Pool(),
	}})
	_, port, _ := net.SplitHostPort(addr)

	tests := []struct {
		name  string
		files setpointclient.TLSFiles
		token string
		want  codes.Code
	}{
		{"mutual TLS and token", setpointclient.TLSFiles{CA: caFile, Cert: certFile, Key: keyFile, ServerName: "setpoint.test"}, "s3cret", codes.NotFound},
		{"wrong token", setpointclient.TLSFiles{CA: caFile, Cert: certFile, Key: keyFile, ServerName: "setpoint.test"}, "guess", codes.Unauthenticated},
		{"no client certificate", setpointclient.TLSFiles{CA: caFile, ServerName: "setpoint.test"}, "s3cret", codes.Unavailable},
		{"wrong server name", setpointclient.TLSFiles{CA: caFile, Cert: certFile, Key: keyFile, ServerName: "other.test"}, "s3cret", codes.Unavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tc, err := tt.files.Config()
			if err != nil {
				t.Fatal(err)
			}
			c, err := setpointclient.Dial("localhost:"+port, setpointclient.Options{TLS: tc, Token: tt.token})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			defer cancel()
			_, err = c.Target(ctx, setpointclient.Key("c", "ns", "missing"))
			if got := status.Code(err); got != tt.want {
				t.Errorf("GetTarget: %v, want code %v", err, tt.want)
			}
		})
	}
}

func TestParseKey(t *testing.T) {
	k, err := setpointclient.ParseKey("prod/shop/web")
	if err != nil || setpointclient.KeyString(k) != "prod/shop/web" {
		t.Errorf("ParseKey(prod/shop/web) = %v, %v", k, err)
	}
	for _, s := range []string{"", "prod/web", "prod//web", "a/b/c/d"} {
		if _, err := setpointclient.ParseKey(s); err == nil {
			t.Errorf("ParseKey(%q) succeeded", s)
		}
	}
}

// snapshot streams data in chunks, announcing size and checksum (or
// wrong ones).
type snapshot struct {
	setpointv1.UnimplementedAdminServiceServer
	data     []byte
	size     int64
	checksum []byte
}

func (s *snapshot) Backup(_ *setpointv1.BackupRequest, stream setpointv1.AdminService_BackupServer) error {
	for i := 0; i < len(s.data); i += 4 {
		msg := &setpointv1.BackupResponse{Data: s.data[i:min(i+4, len(s.data))]}
		if i == 0 {
			msg.Size = s.size
		}
		if i+4 >= len(s.data) {
			msg.Sha256 = s.checksum
		}
		if err := stream.Send(msg); err != nil {
			return err
		}
	}
	return nil
}

func TestBackupVerifies(t *testing.T) {
	data := []byte("a consistent bbolt snapshot")
	sum := sha256.Sum256(data)
	tests := []struct {
		name    string
		snap    snapshot
		wantErr error
	}{
		{"intact", snapshot{data: data, size: int64(len(data)), checksum: sum[:]}, nil},
		{"wrong size", snapshot{data: data, size: int64(len(data)) + 1, checksum: sum[:]}, setpointclient.ErrBackupCorrupt},
		{"wrong checksum", snapshot{data: data, size: int64(len(data)), checksum: make([]byte, 32)}, setpointclient.ErrBackupCorrupt},
		{"no checksum", snapshot{data: data, size: int64(len(data))}, setpointclient.ErrBackupCorrupt},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			addr := serveGRPC(t, func(s *grpc.Server) { setpointv1.RegisterAdminServiceServer(s, &tt.snap) })
			c, err := setpointclient.Dial(addr, setpointclient.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			var buf bytes.Buffer
			n, err := c.Backup(t.Context(), &buf)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Backup: %v, want %v", err, tt.wantErr)
			}
			if n != int64(len(data)) || !bytes.Equal(buf.Bytes(), data) {
				t.Errorf("Backup copied %d bytes %q, want %q", n, buf.Bytes(), data)
			}
		})
	}
}

func TestFieldViolationsOfOtherErrors(t *testing.T) {
	for _, err := range []error{nil, status.Error(codes.NotFound, "no"), status.Error(codes.InvalidArgument, "no details"), errors.New("plain")} {
		if v := setpointclient.FieldViolations(err); v != nil {
			t.Errorf("FieldViolations(%v) = %v, want nil", err, v)
		}
	}
}
