package server_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/setpointhq/setpoint/internal/testpki"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"github.com/setpointhq/setpoint/server"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// pkiFixture is a server CA, a client CA and the files a TLS server with
// authentication reads, all in a temporary directory.
type pkiFixture struct {
	dir                string
	serverCA, clientCA *testpki.CA
	// serverFiles are the server's certificate and key, and the client
	// CA (as CA).
	serverFiles testpki.Files
	// principals is the principals file.
	principals string
}

// principalsJSON: the agent of cluster a (certificate), the agent of
// cluster b (token), a platform granted cluster a (token), an admin
// (certificate without URI SAN: its common name).
var principalsJSON = `{"principals": [
  {"name": "agent-a", "role": "cluster:a", "certificates": ["spiffe://setpoint.test/cluster/a"]},
  {"name": "agent-b", "role": "cluster:b", "token_sha256": ["` + sha256hex("b-token") + `"]},
  {"name": "dashboard", "role": "platform", "clusters": ["a"], "token_sha256": ["` + sha256hex("platform-token") + `"]},
  {"name": "ops", "role": "admin", "certificates": ["ops"]}
]}`

func newPKI(t testing.TB) *pkiFixture {
	t.Helper()
	f := &pkiFixture{dir: t.TempDir(), serverCA: testpki.TestCA(t, "server CA"), clientCA: testpki.TestCA(t, "client CA")}
	f.serverFiles = testpki.Write(t, f.dir, f.clientCA, f.serverCA.Issue(t, testpki.Leaf{CommonName: "localhost", Server: true}))
	f.principals = filepath.Join(f.dir, "principals.json")
	testpki.WriteFile(t, f.principals, []byte(principalsJSON))
	return f
}

// options returns server options serving TLS (client certificates
// optional) and authenticating with the principals file; both are checked
// for changes at every handshake and call.
func (f *pkiFixture) options(t testing.TB, log *slog.Logger) server.Options {
	t.Helper()
	ro := server.ReloadOptions{Interval: time.Nanosecond, Logger: log}
	tc, err := server.NewTLSConfig(server.TLSFiles{Cert: f.serverFiles.Cert, Key: f.serverFiles.Key, ClientCA: f.serverFiles.CA}, ro)
	if err != nil {
		t.Fatal(err)
	}
	a, err := server.NewAuthenticator(f.principals, ro)
	if err != nil {
		t.Fatal(err)
	}
	return server.Options{TLS: tc, Auth: a, Logger: log}
}

// creds are a caller's credentials.
type creds struct {
	cert  *tls.Certificate
	token string
}

// client dials addr over TLS, trusting the server CA, with c.
func (f *pkiFixture) client(t testing.TB, addr string, c creds) setpointv1.AutoscalerServiceClient {
	t.Helper()
	tc := &tls.Config{RootCAs: f.serverCA.Pool(), ServerName: "localhost", MinVersion: tls.VersionTLS12}
	if c.cert != nil {
		tc.Certificates = []tls.Certificate{*c.cert}
	}
	opts := []grpc.DialOption{withTLS(tc)}
	if c.token != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(bearer(c.token)))
	}
	return setpointv1.NewAutoscalerServiceClient(dial(t, addr, opts...))
}

// call is one RPC of a table test.
type call func(context.Context, setpointv1.AutoscalerServiceClient) error

func recommendFor(cluster, name string) call {
	return func(ctx context.Context, c setpointv1.AutoscalerServiceClient) error {
		req := request(name, 2, t0)
		req.Target.Cluster = cluster
		_, err := c.Recommend(ctx, req)
		return err
	}
}

func getIn(cluster, name string) call {
	return func(ctx context.Context, c setpointv1.AutoscalerServiceClient) error {
		_, err := c.GetTarget(ctx, &setpointv1.GetTargetRequest{Target: &setpointv1.TargetKey{Cluster: cluster, Namespace: "shop", Name: name}})
		return err
	}
}

func deleteIn(cluster, name string) call {
	return func(ctx context.Context, c setpointv1.AutoscalerServiceClient) error {
		_, err := c.DeleteTarget(ctx, &setpointv1.DeleteTargetRequest{Target: &setpointv1.TargetKey{Cluster: cluster, Namespace: "shop", Name: name}})
		return err
	}
}

func observeIn(cluster, name string) call {
	return func(ctx context.Context, c setpointv1.AutoscalerServiceClient) error {
		_, err := c.Observe(ctx, &setpointv1.ObserveRequest{Target: &setpointv1.TargetKey{Cluster: cluster, Namespace: "shop", Name: name}, DecisionId: "x",
			Change: &setpointv1.ObserveRequest_External{External: &setpointv1.ExternalChange{From: 2, To: 3}}})
		return err
	}
}

func listIn(cluster string) call {
	return func(ctx context.Context, c setpointv1.AutoscalerServiceClient) error {
		_, err := c.ListTargets(ctx, &setpointv1.ListTargetsRequest{Cluster: cluster})
		return err
	}
}

func simulateSeeded(cluster string) call {
	return func(ctx context.Context, c setpointv1.AutoscalerServiceClient) error {
		req := &setpointv1.SimulateRequest{Spec: request("web", 2, t0).GetSpec()}
		if cluster != "" {
			req.SeedFrom = &setpointv1.TargetKey{Cluster: cluster, Namespace: "shop", Name: "web"}
		}
		_, err := c.Simulate(ctx, req)
		return err
	}
}

// watchIn opens a Watch of cluster and returns the error of its first
// receive: a denied stream fails there; an allowed one is cut short by a
// deadline (or is Unimplemented where no handler serves Watch).
func watchIn(cluster string) call {
	return func(ctx context.Context, c setpointv1.AutoscalerServiceClient) error {
		ctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		s, err := c.Watch(ctx, &setpointv1.WatchRequest{Cluster: cluster})
		if err != nil {
			return err
		}
		_, err = s.Recv()
		return err
	}
}

// allowedCode stands for "allowed": any code but Unauthenticated and
// PermissionDenied (e.g. OK, NotFound, or Unimplemented for an RPC no
// handler serves yet).
const allowedCode = codes.Code(1000)

func TestAuthorizationOverMutualTLS(t *testing.T) {
	f := newPKI(t)
	var logs syncBuffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	ts := start(t, setup{opts: f.options(t, log)})

	agentA := f.clientCA.Issue(t, testpki.Leaf{CommonName: "agent", URI: "spiffe://setpoint.test/cluster/a"})
	ops := f.clientCA.Issue(t, testpki.Leaf{CommonName: "ops"})
	stranger := f.clientCA.Issue(t, testpki.Leaf{CommonName: "stranger", URI: "spiffe://setpoint.test/cluster/z"})
	expired := f.clientCA.Issue(t, testpki.Leaf{CommonName: "agent", URI: "spiffe://setpoint.test/cluster/a", NotAfter: time.Now().Add(-time.Minute)})
	// A CA of the same name, so the client sends the certificate (Go's
	// client sends only certificates of the CAs the server asks for).
	forged := testpki.TestCA(t, "client CA").Issue(t, testpki.Leaf{CommonName: "ops"})
	// A SPIFFE ID in the common name of a certificate without URI SAN.
	cnSpiffe := f.clientCA.Issue(t, testpki.Leaf{CommonName: "spiffe://setpoint.test/cluster/a"})

	// The admin creates a target in each cluster.
	admin := f.client(t, ts.addr, creds{cert: &ops.Cert})
	for _, cl := range []string{"a", "b"} {
		if err := recommendFor(cl, "web")(t.Context(), admin); err != nil {
			t.Fatalf("admin Recommend in %s: %v", cl, err)
		}
	}

	t.Run("denials do not tell whether the target exists", func(t *testing.T) {
		c := f.client(t, ts.addr, creds{cert: &agentA.Cert})
		exists := status.Convert(getIn("b", "web")(t.Context(), c))
		missing := status.Convert(getIn("b", "surely-missing")(t.Context(), c))
		if exists.Code() != codes.PermissionDenied || exists.Message() != missing.Message() || len(exists.Details()) != 0 {
			t.Errorf("denials differ: %v / %v", exists, missing)
		}
	})

	tests := []struct {
		name   string
		caller creds
		call   call
		want   codes.Code
	}{
		{"agent A decides for A", creds{cert: &agentA.Cert}, recommendFor("a", "web"), codes.OK},
		{"agent A observes in A", creds{cert: &agentA.Cert}, observeIn("a", "web"), allowedCode},
		{"agent A reads A", creds{cert: &agentA.Cert}, getIn("a", "web"), codes.OK},
		{"agent A lists A", creds{cert: &agentA.Cert}, listIn("a"), codes.OK},
		{"agent A decides for B", creds{cert: &agentA.Cert}, recommendFor("b", "web"), codes.PermissionDenied},
		{"agent A observes in B", creds{cert: &agentA.Cert}, observeIn("b", "web"), codes.PermissionDenied},
		{"agent A reads B", creds{cert: &agentA.Cert}, getIn("b", "web"), codes.PermissionDenied},
		{"agent A reads a missing target of B", creds{cert: &agentA.Cert}, getIn("b", "nope"), codes.PermissionDenied},
		{"agent A deletes in B", creds{cert: &agentA.Cert}, deleteIn("b", "web"), codes.PermissionDenied},
		{"agent A lists every cluster", creds{cert: &agentA.Cert}, listIn(""), codes.PermissionDenied},
		{"agent A lists B", creds{cert: &agentA.Cert}, listIn("b"), codes.PermissionDenied},
		{"agent A simulates", creds{cert: &agentA.Cert}, simulateSeeded(""), allowedCode},
		{"agent A simulates seeded from A", creds{cert: &agentA.Cert}, simulateSeeded("a"), allowedCode},
		{"agent A simulates seeded from B", creds{cert: &agentA.Cert}, simulateSeeded("b"), codes.PermissionDenied},
		{"agent A watches A", creds{cert: &agentA.Cert}, watchIn("a"), allowedCode},
		{"agent A watches everything (filtered)", creds{cert: &agentA.Cert}, watchIn(""), allowedCode},
		{"agent A watches B", creds{cert: &agentA.Cert}, watchIn("b"), codes.PermissionDenied},
		{"agent B by token decides for B", creds{token: "b-token"}, recommendFor("b", "web"), codes.OK},
		{"agent B by token reads A", creds{token: "b-token"}, getIn("a", "web"), codes.PermissionDenied},
		{"platform reads A", creds{token: "platform-token"}, getIn("a", "web"), codes.OK},
		{"platform lists A", creds{token: "platform-token"}, listIn("a"), codes.OK},
		{"platform reads B (not granted)", creds{token: "platform-token"}, getIn("b", "web"), codes.PermissionDenied},
		{"platform decides", creds{token: "platform-token"}, recommendFor("a", "web"), codes.PermissionDenied},
		{"platform observes", creds{token: "platform-token"}, observeIn("a", "web"), codes.PermissionDenied},
		{"platform deletes", creds{token: "platform-token"}, deleteIn("a", "web"), codes.PermissionDenied},
		{"platform watches A", creds{token: "platform-token"}, watchIn("a"), allowedCode},
		{"platform watches B", creds{token: "platform-token"}, watchIn("b"), codes.PermissionDenied},
		{"no credentials", creds{}, getIn("a", "web"), codes.Unauthenticated},
		{"no credentials, stream", creds{}, watchIn("a"), codes.Unauthenticated},
		{"unknown token", creds{token: "guess"}, getIn("a", "web"), codes.Unauthenticated},
		{"certificate of no principal", creds{cert: &stranger.Cert}, getIn("a", "web"), codes.Unauthenticated},
		{"certificate of no principal, known token", creds{cert: &stranger.Cert, token: "platform-token"}, getIn("a", "web"), codes.OK},
		{"expired certificate", creds{cert: &expired.Cert}, getIn("a", "web"), codes.Unavailable},
		{"certificate signed by another CA", creds{cert: &forged.Cert}, getIn("a", "web"), codes.Unavailable},
		{"SPIFFE ID as common name, no URI SAN", creds{cert: &cnSpiffe.Cert}, getIn("a", "web"), codes.Unauthenticated},
		{"admin deletes in B", creds{cert: &ops.Cert}, deleteIn("b", "web"), codes.OK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call(t.Context(), f.client(t, ts.addr, tt.caller))
			got := status.Code(err)
			if tt.want == allowedCode {
				if got == codes.Unauthenticated || got == codes.PermissionDenied {
					t.Errorf("err = %v, want the call allowed", err)
				}
				return
			}
			if got != tt.want {
				t.Errorf("err = %v, want %v", err, tt.want)
			}
		})
	}

	t.Run("health needs no credentials", func(t *testing.T) {
		conn := dial(t, ts.addr, withTLS(&tls.Config{RootCAs: f.serverCA.Pool(), ServerName: "localhost", MinVersion: tls.VersionTLS12}))
		if _, err := healthpb.NewHealthClient(conn).Check(t.Context(), &healthpb.HealthCheckRequest{}); err != nil {
			t.Errorf("health: %v", err)
		}
	})

	t.Run("audit log", func(t *testing.T) {
		records := logs.records(t)
		want := []map[string]any{
			{"event": "denied", "principal": "agent-a", "target": "b/shop/web", "outcome": "PermissionDenied", "method": setpointv1.AutoscalerService_Recommend_FullMethodName},
			{"event": "denied", "principal": "dashboard", "target": "a/shop/web", "outcome": "PermissionDenied", "method": setpointv1.AutoscalerService_DeleteTarget_FullMethodName},
			{"event": "denied", "principal": "", "outcome": "Unauthenticated", "method": setpointv1.AutoscalerService_Watch_FullMethodName},
			// Refused before the body is read: no target; sampled per peer.
			{"event": "denied", "principal": "", "outcome": "Unauthenticated", "reason": "unknown token", "method": setpointv1.AutoscalerService_GetTarget_FullMethodName, "count": 1.0},
			{"event": "decision", "principal": "agent-a", "target": "a/shop/web", "outcome": "rescale"},
			{"event": "decision", "principal": "ops", "target": "b/shop/web", "outcome": "rescale"},
			{"event": "delete", "principal": "ops", "target": "b/shop/web", "outcome": "deleted"},
		}
		for _, w := range want {
			if !containsRecord(records, w) {
				t.Errorf("no audit record %v", w)
			}
		}
	})
}

// syncBuffer is a bytes.Buffer safe for concurrent writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns everything written so far.
func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// records returns the audit records logged so far.
func (s *syncBuffer) records(t *testing.T) []map[string]any {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	for line := range strings.SplitSeq(strings.TrimSpace(s.b.String()), "\n") {
		var r map[string]any
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if r["msg"] == "audit" {
			out = append(out, r)
		}
	}
	return out
}

// containsRecord reports whether one of records has every field of want.
func containsRecord(records []map[string]any, want map[string]any) bool {
next:
	for _, r := range records {
		for k, v := range want {
			if r[k] != v {
				continue next
			}
		}
		return true
	}
	return false
}

func TestRotation(t *testing.T) {
	f := newPKI(t)
	ts := start(t, setup{opts: f.options(t, slog.New(slog.NewTextHandler(io.Discard, nil)))})
	ctx := t.Context()

	// servedSerial dials anew and returns the serial of the server
	// certificate the handshake saw.
	servedSerial := func(c creds) (string, error) {
		var (
			mu     sync.Mutex
			serial string
		)
		tc := &tls.Config{RootCAs: f.serverCA.Pool(), ServerName: "localhost", MinVersion: tls.VersionTLS12,
			VerifyConnection: func(cs tls.ConnectionState) error {
				mu.Lock()
				defer mu.Unlock()
				serial = cs.PeerCertificates[0].SerialNumber.String()
				return nil
			}}
		if c.cert != nil {
			tc.Certificates = []tls.Certificate{*c.cert}
		}
		opts := []grpc.DialOption{withTLS(tc)}
		if c.token != "" {
			opts = append(opts, grpc.WithPerRPCCredentials(bearer(c.token)))
		}
		_, err := setpointv1.NewAutoscalerServiceClient(dial(t, ts.addr, opts...)).ListTargets(ctx, &setpointv1.ListTargetsRequest{Cluster: "a"})
		mu.Lock()
		defer mu.Unlock()
		return serial, err
	}
	platform := creds{token: "platform-token"}
	before, err := servedSerial(platform)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("server certificate", func(t *testing.T) {
		next := f.serverCA.Issue(t, testpki.Leaf{CommonName: "localhost", Server: true})
		testpki.WriteFile(t, f.serverFiles.Key, next.KeyPEM)
		testpki.WriteFile(t, f.serverFiles.Cert, next.CertPEM)
		got, err := servedSerial(platform)
		if err != nil || got != next.Leaf.SerialNumber.String() || got == before {
			t.Errorf("after rotation: serial %s (%v), want %s (was %s)", got, err, next.Leaf.SerialNumber, before)
		}
	})

	t.Run("client CA", func(t *testing.T) {
		newCA := testpki.TestCA(t, "next client CA")
		agent := newCA.Issue(t, testpki.Leaf{URI: "spiffe://setpoint.test/cluster/a"})
		// Go's client does not even send a certificate the server's
		// acceptable CAs do not cover: refused either way.
		if _, err := servedSerial(creds{cert: &agent.Cert}); status.Code(err) != codes.Unavailable && status.Code(err) != codes.Unauthenticated {
			t.Fatalf("certificate of a CA not yet trusted: %v, want Unavailable or Unauthenticated", err)
		}
		testpki.WriteFile(t, f.serverFiles.CA, newCA.PEM)
		if _, err := servedSerial(creds{cert: &agent.Cert}); err != nil {
			t.Errorf("certificate of the rotated-in CA: %v", err)
		}
	})

	t.Run("principals file", func(t *testing.T) {
		late := creds{token: "late-token"}
		if _, err := servedSerial(late); status.Code(err) != codes.Unauthenticated {
			t.Fatalf("unknown token: %v, want Unauthenticated", err)
		}
		added := strings.Replace(principalsJSON, `{"name": "ops"`, `{"name": "late", "role": "platform", "clusters": ["*"], "token_sha256": ["`+sha256hex("late-token")+`"]},
  {"name": "ops"`, 1)
		testpki.WriteFile(t, f.principals, []byte(added))
		if _, err := servedSerial(late); err != nil {
			t.Errorf("token added to the principals file: %v", err)
		}
		// A broken file keeps the last good principals.
		testpki.WriteFile(t, f.principals, []byte(`{"principals": [{"name": "x", "role": "king"}]}`))
		if _, err := servedSerial(late); err != nil {
			t.Errorf("after a broken principals file: %v", err)
		}
	})
}

func TestParseAuthConfig(t *testing.T) {
	sum := sha256hex("t")
	tests := []struct {
		name string
		file string
		ok   bool
	}{
		{"the test file", principalsJSON, true},
		{"yaml", "principals:\n- name: a\n  role: cluster:a\n  certificates: [spiffe://x/cluster/a]\n", true},
		{"unknown role", `{"principals": [{"name": "a", "role": "agent", "token_sha256": ["` + sum + `"]}]}`, false},
		{"empty cluster role", `{"principals": [{"name": "a", "role": "cluster:", "token_sha256": ["` + sum + `"]}]}`, false},
		{"platform without clusters", `{"principals": [{"name": "a", "role": "platform", "token_sha256": ["` + sum + `"]}]}`, false},
		{"clusters on an agent", `{"principals": [{"name": "a", "role": "cluster:a", "clusters": ["b"], "token_sha256": ["` + sum + `"]}]}`, false},
		{"no credentials", `{"principals": [{"name": "a", "role": "admin"}]}`, false},
		{"clear-text token", `{"principals": [{"name": "a", "role": "admin", "token": "t"}]}`, false},
		{"not a digest", `{"principals": [{"name": "a", "role": "admin", "token_sha256": ["abc"]}]}`, false},
		{"duplicate name", `{"principals": [{"name": "a", "role": "admin", "certificates": ["x"]}, {"name": "a", "role": "admin", "certificates": ["y"]}]}`, false},
		{"identity of two principals", `{"principals": [{"name": "a", "role": "admin", "certificates": ["x"]}, {"name": "b", "role": "admin", "certificates": ["x"]}]}`, false},
		{"token of two principals", `{"principals": [{"name": "a", "role": "admin", "token_sha256": ["` + sum + `"]}, {"name": "b", "role": "platform", "clusters": ["*"], "token_sha256": ["` + sum + `"]}]}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := server.ParseAuthConfig([]byte(tt.file)); (err == nil) != tt.ok {
				t.Errorf("ParseAuthConfig = %v, want ok=%v", err, tt.ok)
			}
		})
	}
}

func TestPrincipalAccess(t *testing.T) {
	agent := server.Principal{Name: "a", Role: server.ClusterRole("a")}
	platform := server.Principal{Name: "p", Role: server.RolePlatform, Clusters: []string{"a", "c"}}
	everywhere := server.Principal{Name: "e", Role: server.RolePlatform, Clusters: []string{server.AllClusters}}
	admin := server.Principal{Name: "o", Role: server.RoleAdmin}
	tests := []struct {
		p           server.Principal
		cluster     string
		read, write bool
	}{
		{agent, "a", true, true},
		{agent, "b", false, false},
		{agent, "", false, false},
		{platform, "a", true, false},
		{platform, "c", true, false},
		{platform, "b", false, false},
		{platform, "", false, false},
		{everywhere, "b", true, false},
		{everywhere, "", true, false},
		{admin, "b", true, true},
		{admin, "", true, true},
	}
	for _, tt := range tests {
		if got := tt.p.CanRead(tt.cluster); got != tt.read {
			t.Errorf("%s CanRead(%q) = %v, want %v", tt.p.Name, tt.cluster, got, tt.read)
		}
		if got := tt.p.CanWrite(tt.cluster); got != tt.write {
			t.Errorf("%s CanWrite(%q) = %v, want %v", tt.p.Name, tt.cluster, got, tt.write)
		}
	}
}

func TestNewTLSConfigRefusesBadFiles(t *testing.T) {
	dir := t.TempDir()
	ca := testpki.TestCA(t, "ca")
	files := testpki.Write(t, dir, ca, ca.Issue(t, testpki.Leaf{CommonName: "localhost", Server: true}))
	garbage := filepath.Join(dir, "garbage.pem")
	if err := os.WriteFile(garbage, []byte("not PEM"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		files server.TLSFiles
		ok    bool
	}{
		{"server only", server.TLSFiles{Cert: files.Cert, Key: files.Key}, true},
		{"mutual TLS", server.TLSFiles{Cert: files.Cert, Key: files.Key, ClientCA: files.CA, RequireClientCert: true}, true},
		{"no key", server.TLSFiles{Cert: files.Cert}, false},
		{"key of another certificate", server.TLSFiles{Cert: files.Cert, Key: files.CA}, false},
		{"client CA not PEM", server.TLSFiles{Cert: files.Cert, Key: files.Key, ClientCA: garbage}, false},
		{"required client certificates without a CA", server.TLSFiles{Cert: files.Cert, Key: files.Key, RequireClientCert: true}, false},
		{"missing file", server.TLSFiles{Cert: files.Cert, Key: filepath.Join(dir, "missing.pem")}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := server.NewTLSConfig(tt.files, server.ReloadOptions{}); (err == nil) != tt.ok {
				t.Errorf("NewTLSConfig = %v, want ok=%v", err, tt.ok)
			}
		})
	}
}

func TestRequiredClientCertificate(t *testing.T) {
	f := newPKI(t)
	tc, err := server.NewTLSConfig(server.TLSFiles{Cert: f.serverFiles.Cert, Key: f.serverFiles.Key, ClientCA: f.serverFiles.CA, RequireClientCert: true}, server.ReloadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a, err := server.NewAuthenticator(f.principals, server.ReloadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ts := start(t, setup{opts: server.Options{TLS: tc, Auth: a}})
	agent := f.clientCA.Issue(t, testpki.Leaf{URI: "spiffe://setpoint.test/cluster/a"})
	if err := listIn("a")(t.Context(), f.client(t, ts.addr, creds{cert: &agent.Cert})); err != nil {
		t.Errorf("with a client certificate: %v", err)
	}
	if err := listIn("a")(t.Context(), f.client(t, ts.addr, creds{token: "platform-token"})); status.Code(err) != codes.Unavailable {
		t.Errorf("token without a client certificate: %v, want Unavailable", err)
	}
}
