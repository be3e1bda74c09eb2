package setpointclient_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	setpointclient "github.com/setpointhq/setpoint/clients/go"
	"github.com/setpointhq/setpoint/internal/testkit"
	"github.com/setpointhq/setpoint/internal/testpki"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
)

// recorder answers GetTarget with NotFound and records, for each call, the
// bearer token and the common name of the client certificate it came with.
type recorder struct {
	setpointv1.UnimplementedAutoscalerServiceServer
	mu     sync.Mutex
	tokens []string
	names  []string
}

func (r *recorder) GetTarget(ctx context.Context, _ *setpointv1.GetTargetRequest) (*setpointv1.GetTargetResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	name := ""
	if p, ok := peer.FromContext(ctx); ok {
		if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok && len(ti.State.PeerCertificates) > 0 {
			name = ti.State.PeerCertificates[0].Subject.CommonName
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.tokens = append(r.tokens, md.Get("authorization")...)
	r.names = append(r.names, name)
	return nil, status.Error(codes.NotFound, "no such target")
}

// last returns the last call's token and certificate name.
func (r *recorder) last() (token, name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.tokens) > 0 {
		token = r.tokens[len(r.tokens)-1]
	}
	if len(r.names) > 0 {
		name = r.names[len(r.names)-1]
	}
	return token, name
}

// get makes one GetTarget call and wants the recorder's NotFound.
func get(t *testing.T, c *setpointclient.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if _, err := c.GetTarget(ctx, &setpointv1.GetTargetRequest{Target: setpointclient.Key("c", "ns", "n")}); status.Code(err) != codes.NotFound {
		t.Fatalf("GetTarget: %v, want NotFound from the server", err)
	}
}

// A token file is read at every call: a rotated token goes with the next
// call, on the same connection.
func TestTokenFileReadAtEveryCall(t *testing.T) {
	r := &recorder{}
	addr := serveGRPC(t, func(s *grpc.Server) { setpointv1.RegisterAutoscalerServiceServer(s, r) })
	path := filepath.Join(t.TempDir(), "token")
	testpki.WriteFile(t, path, []byte("first\n"))
	c, err := setpointclient.Dial(addr, setpointclient.Options{TokenFile: path})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	get(t, c)
	if tok, _ := r.last(); tok != "Bearer first" {
		t.Errorf("first call's authorization = %q, want %q", tok, "Bearer first")
	}
	testpki.WriteFile(t, path, []byte("second"))
	get(t, c)
	if tok, _ := r.last(); tok != "Bearer second" {
		t.Errorf("after the rotation, authorization = %q, want %q", tok, "Bearer second")
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetTarget(t.Context(), &setpointv1.GetTargetRequest{}); status.Code(err) != codes.Unavailable {
		t.Errorf("GetTarget without the token file: %v, want UNAVAILABLE", err)
	}
}

// Dial checks what it can of a token file and of the token options.
func TestTokenFileOptions(t *testing.T) {
	dir := t.TempDir()
	token, empty := filepath.Join(dir, "token"), filepath.Join(dir, "empty")
	testpki.WriteFile(t, token, []byte("t"))
	testpki.WriteFile(t, empty, []byte(" \n"))
	tests := []struct {
		name string
		addr string
		opts setpointclient.Options
		ok   bool
	}{
		{"file", "127.0.0.1:7443", setpointclient.Options{TokenFile: token}, true},
		{"missing file", "127.0.0.1:7443", setpointclient.Options{TokenFile: filepath.Join(dir, "missing")}, false},
		{"empty file", "127.0.0.1:7443", setpointclient.Options{TokenFile: empty}, false},
		{"token and file", "127.0.0.1:7443", setpointclient.Options{Token: "t", TokenFile: token}, false},
		{"file in plaintext off loopback", "setpoint.example:7443", setpointclient.Options{TokenFile: token}, false},
		{"file over TLS", "setpoint.example:7443", setpointclient.Options{TokenFile: token, TLS: &tls.Config{MinVersion: tls.VersionTLS12}}, true},
	}
	for _, tt := range tests {
		c, err := setpointclient.Dial(tt.addr, tt.opts)
		if (err == nil) != tt.ok {
			t.Errorf("%s: Dial = %v, want ok=%v", tt.name, err, tt.ok)
		}
		if c != nil {
			c.Close()
		}
	}
}

// TLSFiles' configuration reads the client certificate at every
// handshake: a connection made after the files were rotated presents the
// new certificate, and one made while they do not match presents the last
// pair that did.
func TestTLSFilesRotatedCertificate(t *testing.T) {
	dir := t.TempDir()
	ca := testpki.TestCA(t, "setpoint-test-ca")
	serving := ca.Issue(t, testpki.Leaf{CommonName: "setpoint", Server: true})
	caFile := filepath.Join(dir, "ca.pem")
	testpki.WriteFile(t, caFile, ca.PEM)
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	write := func(p testpki.Pair) {
		testpki.WriteFile(t, certFile, p.CertPEM)
		testpki.WriteFile(t, keyFile, p.KeyPEM)
	}
	write(ca.Issue(t, testpki.Leaf{CommonName: "before"}))

	r := &recorder{}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer(grpc.Creds(credentials.NewTLS(&tls.Config{
		MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{serving.Cert},
		ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: ca.Pool(),
	})))
	setpointv1.RegisterAutoscalerServiceServer(s, r)
	go s.Serve(lis)
	t.Cleanup(s.Stop)

	tc, err := setpointclient.TLSFiles{CA: caFile, Cert: certFile, Key: keyFile}.Config()
	if err != nil {
		t.Fatal(err)
	}
	// Each Dial makes a new connection with the same configuration, as a
	// long-running client does when it reconnects.
	presented := func() string {
		c, err := setpointclient.Dial(lis.Addr().String(), setpointclient.Options{TLS: tc})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		get(t, c)
		_, name := r.last()
		return name
	}
	if got := presented(); got != "before" {
		t.Errorf("certificate presented = %q, want %q", got, "before")
	}
	write(ca.Issue(t, testpki.Leaf{CommonName: "after"}))
	if got := presented(); got != "after" {
		t.Errorf("after the rotation, certificate presented = %q, want %q", got, "after")
	}
	// Half a rotation: a new certificate beside the old key.
	testpki.WriteFile(t, certFile, ca.Issue(t, testpki.Leaf{CommonName: "half"}).CertPEM)
	if got := presented(); got != "after" {
		t.Errorf("with a mismatched pair, certificate presented = %q, want the last good one %q", got, "after")
	}
}

// blackhole forwards TCP connections to a server until cut; then it keeps
// every connection open and drops what either side sends, as a network
// that lost its route does.
type blackhole struct {
	lis      net.Listener
	target   string
	cut      atomic.Bool
	accepted atomic.Int32
	mu       sync.Mutex
	conns    []net.Conn
	wg       sync.WaitGroup
}

func startBlackhole(t *testing.T, target string) *blackhole {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &blackhole{lis: lis, target: target}
	b.wg.Add(1)
	go b.accept()
	t.Cleanup(func() {
		lis.Close()
		b.mu.Lock()
		for _, c := range b.conns {
			c.Close()
		}
		b.mu.Unlock()
		b.wg.Wait()
	})
	return b
}

func (b *blackhole) accept() {
	defer b.wg.Done()
	for {
		in, err := b.lis.Accept()
		if err != nil {
			return
		}
		b.accepted.Add(1)
		out, err := net.Dial("tcp", b.target)
		if err != nil {
			in.Close()
			continue
		}
		b.mu.Lock()
		b.conns = append(b.conns, in, out)
		b.mu.Unlock()
		b.wg.Add(2)
		go b.pipe(out, in)
		go b.pipe(in, out)
	}
}

// pipe copies src to dst, dropping what arrives once cut.
func (b *blackhole) pipe(dst, src net.Conn) {
	defer b.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !b.cut.Load() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			dst.Close()
			return
		}
	}
}

// With Keepalive, a connection whose server went silent is noticed and
// replaced: the client dials again. Without pings it would wait for a
// call's deadline, and an idle connection would stay "ready" forever.
// The test takes about 11 s: gRPC's shortest ping interval is 10 s.
func TestKeepaliveReplacesDeadConnection(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer(grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: time.Second, PermitWithoutStream: true}))
	setpointv1.RegisterAutoscalerServiceServer(s, &recorder{})
	go s.Serve(lis)
	t.Cleanup(s.Stop)
	b := startBlackhole(t, lis.Addr().String())

	c, err := setpointclient.Dial(b.lis.Addr().String(), setpointclient.Options{
		Keepalive: keepalive.ClientParameters{Time: 10 * time.Second, Timeout: time.Second, PermitWithoutStream: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	get(t, c)
	if n := b.accepted.Load(); n != 1 {
		t.Fatalf("connections before the cut = %d, want 1", n)
	}
	b.cut.Store(true)
	testkit.Eventually(t, 30*time.Second, "a new connection after the cut", func() error {
		if n := b.accepted.Load(); n < 2 {
			return fmt.Errorf("%d connection(s) made", n)
		}
		return nil
	})
}
