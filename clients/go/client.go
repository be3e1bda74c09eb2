package setpointclient

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/setpointhq/setpoint/clients/go/endpoints"
	"github.com/setpointhq/setpoint/internal/netaddr"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"
)

// DefaultAddr is the address setpoint-server listens on by default.
const DefaultAddr = "127.0.0.1:7443"

// Options configure a connection. The zero value dials in plaintext
// without a token, for a development server on loopback.
type Options struct {
	// Token is the bearer token sent with every call; empty sends none.
	Token string
	// TokenFile names a file holding the bearer token (surrounding white
	// space ignored). It is read by Dial, which fails when it cannot be,
	// and again at every call, so a rotated token (a projected
	// service-account token, an updated Secret) is sent from the next
	// call on; a call fails with UNAVAILABLE while the file is missing or
	// empty. Token and TokenFile exclude each other.
	TokenFile string
	// TLS, when set, secures the connection (TLSFiles builds one from PEM
	// files, with a client certificate for mutual TLS that is read again
	// at every handshake); nil dials in plaintext, which is allowed with a
	// token only to a loopback address.
	TLS *tls.Config
	// ServiceConfig is the gRPC service config in JSON (retry policies,
	// timeouts); empty means DefaultServiceConfig. A caller that sets
	// every call's deadline itself and wants no retries may use
	// endpoints.Balanced, which only balances.
	ServiceConfig string
	// Keepalive, when its Time is set, pings the server after Time
	// without activity and closes the connection when no answer comes
	// within Timeout, so a dead connection (a server gone without closing
	// it, a network partition) is noticed and replaced instead of holding
	// calls until their deadline. With PermitWithoutStream it pings idle
	// connections too. The server refuses pings more often than its
	// -keepalive-min-time (10 s by default); gRPC raises a Time under
	// 10 s to 10 s. The zero value sends no pings.
	Keepalive keepalive.ClientParameters
	// Reconnect, when set, is the back-off between attempts to connect
	// to a server and the least time one attempt is given; the zero value
	// keeps gRPC's (from 1 s up to 120 s between attempts, 20 s per
	// attempt). A long-running client lowers the maximum delay to be
	// back within seconds once the server is.
	Reconnect grpc.ConnectParams
	// DialOptions are appended to the client's own.
	DialOptions []grpc.DialOption
}

// Client is a connection to a Setpoint server; its embedded clients have
// one method per AutoscalerService and FleetService RPC, Admin has
// AdminService's. It is safe for concurrent use.
type Client struct {
	setpointv1.AutoscalerServiceClient
	setpointv1.FleetServiceClient
	// Admin calls the operators' AdminService (admin principals only).
	Admin setpointv1.AdminServiceClient
	// Health is the standard gRPC health service of the server.
	Health healthpb.HealthClient

	conn *grpc.ClientConn
}

// Dial returns a client of the servers addr names, in any form package
// endpoints reads: host:port (every address DNS gives the name), a gRPC
// target such as dns:///setpoint-headless.setpoint-system:7443, or a
// comma-separated list of host:port.
//
// With DefaultServiceConfig calls are balanced round-robin over the
// servers whose health service answers SERVING (a server shutting down,
// or whose store is unreachable, gets no new calls), and reads that fail
// with UNAVAILABLE are retried, each attempt on the next server. The
// connections are made lazily, by the first call.
func Dial(addr string, o Options) (*Client, error) {
	creds := insecure.NewCredentials()
	if o.TLS != nil {
		creds = credentials.NewTLS(o.TLS)
	}
	target, opts, err := endpoints.Target(addr)
	if err != nil {
		return nil, fmt.Errorf("setpointclient: %w", err)
	}
	sc := o.ServiceConfig
	if sc == "" {
		sc = DefaultServiceConfig
	}
	opts = append(opts, grpc.WithTransportCredentials(creds), grpc.WithDefaultServiceConfig(sc))
	opts = append(opts, userTermsInterceptors(addr)...)
	if o.Keepalive.Time > 0 {
		opts = append(opts, grpc.WithKeepaliveParams(o.Keepalive))
	}
	if o.Reconnect != (grpc.ConnectParams{}) {
		opts = append(opts, grpc.WithConnectParams(o.Reconnect))
	}
	if o.Token != "" || o.TokenFile != "" {
		if o.Token != "" && o.TokenFile != "" {
			return nil, errors.New("setpointclient: Token and TokenFile exclude each other")
		}
		remote := func(a string) bool { return !netaddr.Loopback(a) }
		if o.TLS == nil && slices.ContainsFunc(endpoints.Split(addr), remote) {
			return nil, fmt.Errorf("setpointclient: refusing to send a bearer token in plaintext to %s: configure TLS", addr)
		}
		var perRPC credentials.PerRPCCredentials = bearer{token: o.Token, requireTLS: o.TLS != nil}
		if o.TokenFile != "" {
			f := tokenFile{path: o.TokenFile, requireTLS: o.TLS != nil}
			if _, err := f.read(); err != nil {
				return nil, err
			}
			perRPC = f
		}
		opts = append(opts, grpc.WithPerRPCCredentials(perRPC))
	}
	conn, err := grpc.NewClient(target, append(opts, o.DialOptions...)...)
	if err != nil {
		return nil, fmt.Errorf("setpointclient: dial %s: %w", addr, err)
	}
	return &Client{
		AutoscalerServiceClient: setpointv1.NewAutoscalerServiceClient(conn),
		FleetServiceClient:      setpointv1.NewFleetServiceClient(conn),
		Admin:                   setpointv1.NewAdminServiceClient(conn),
		Health:                  healthpb.NewHealthClient(conn),
		conn:                    conn,
	}, nil
}

// Conn returns the underlying connection.
func (c *Client) Conn() *grpc.ClientConn { return c.conn }

// Close closes the connection; calls in flight fail with Canceled.
func (c *Client) Close() error { return c.conn.Close() }

// bearer sends a bearer token with every call.
type bearer struct {
	token      string
	requireTLS bool
}

// GetRequestMetadata implements credentials.PerRPCCredentials.
func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + b.token}, nil
}

// RequireTransportSecurity implements credentials.PerRPCCredentials.
func (b bearer) RequireTransportSecurity() bool { return b.requireTLS }

// tokenFile sends the bearer token read from a file at every call.
type tokenFile struct {
	path       string
	requireTLS bool
}

// read returns the file's token.
func (t tokenFile) read() (string, error) {
	b, err := os.ReadFile(t.path)
	if err != nil {
		return "", fmt.Errorf("setpointclient: token file: %w", err)
	}
	token := strings.TrimSpace(string(b))
	if token == "" {
		return "", fmt.Errorf("setpointclient: token file %s is empty", t.path)
	}
	return token, nil
}

// GetRequestMetadata implements credentials.PerRPCCredentials. A token
// that cannot be read fails the call with UNAVAILABLE (gRPC would say
// UNAUTHENTICATED): the file is being rotated, and the call may be retried.
func (t tokenFile) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	token, err := t.read()
	if err != nil {
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	return map[string]string{"authorization": "Bearer " + token}, nil
}

// RequireTransportSecurity implements credentials.PerRPCCredentials.
func (t tokenFile) RequireTransportSecurity() bool { return t.requireTLS }

// TLSFiles names the PEM files of a TLS client configuration.
type TLSFiles struct {
	// CA verifies the server's certificate; empty uses the system roots.
	CA string
	// Cert and Key are the client certificate and key for mutual TLS;
	// both or neither.
	Cert, Key string
	// ServerName overrides the name verified in the server's certificate
	// (by default the host of the dialed address).
	ServerName string
}

// Config loads the files into a TLS configuration (TLS 1.2 or later). The
// CA is read once. The client certificate is read here, so a missing or
// mismatched pair is an error now, and again at every handshake, so a
// rotated certificate (cert-manager, a renewed Secret) is used by the next
// connection without a restart; while the files cannot be read as a pair
// (a rotation half done), the last pair read is used.
func (f TLSFiles) Config() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: f.ServerName}
	if f.CA != "" {
		pem, err := os.ReadFile(f.CA)
		if err != nil {
			return nil, fmt.Errorf("setpointclient: CA: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("setpointclient: CA %s: no PEM certificate", f.CA)
		}
	}
	if (f.Cert == "") != (f.Key == "") {
		return nil, errors.New("setpointclient: client certificate and key must be given together")
	}
	if f.Cert != "" {
		cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
		if err != nil {
			return nil, fmt.Errorf("setpointclient: client certificate: %w", err)
		}
		kp := &keyPair{cert: &cert, certFile: f.Cert, keyFile: f.Key}
		cfg.GetClientCertificate = kp.current
	}
	return cfg, nil
}

// keyPair is a client certificate read from its files at every handshake.
type keyPair struct {
	certFile, keyFile string

	mu   sync.Mutex
	cert *tls.Certificate // the last pair read
}

// current implements tls.Config.GetClientCertificate: the pair as the
// files hold it now, or the last pair read when they cannot be read.
func (k *keyPair) current(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if cert, err := tls.LoadX509KeyPair(k.certFile, k.keyFile); err == nil {
		k.cert = &cert
	}
	return k.cert, nil
}
