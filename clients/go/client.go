package setpointclient

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"slices"

	"github.com/setpointhq/setpoint/clients/go/endpoints"
	"github.com/setpointhq/setpoint/internal/netaddr"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// DefaultAddr is the address setpoint-server listens on by default.
const DefaultAddr = "127.0.0.1:7443"

// Options configure a connection. The zero value dials in plaintext
// without a token, for a development server on loopback.
type Options struct {
	// Token is the bearer token sent with every call; empty sends none.
	Token string
	// TLS, when set, secures the connection (TLSFiles builds one from PEM
	// files, with a client certificate for mutual TLS); nil dials in
	// plaintext, which is allowed with a token only to a loopback address.
	TLS *tls.Config
	// ServiceConfig is the gRPC service config in JSON (retry policies,
	// timeouts); empty means DefaultServiceConfig.
	ServiceConfig string
	// DialOptions are appended to the client's own.
	DialOptions []grpc.DialOption
}

// Client is a connection to a Setpoint server; its embedded client has one
// method per AutoscalerService RPC, Admin has AdminService's. It is safe
// for concurrent use.
type Client struct {
	setpointv1.AutoscalerServiceClient
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
	if o.Token != "" {
		remote := func(a string) bool { return !netaddr.Loopback(a) }
		if o.TLS == nil && slices.ContainsFunc(endpoints.Split(addr), remote) {
			return nil, fmt.Errorf("setpointclient: refusing to send a bearer token in plaintext to %s: configure TLS", addr)
		}
		opts = append(opts, grpc.WithPerRPCCredentials(bearer{token: o.Token, requireTLS: o.TLS != nil}))
	}
	conn, err := grpc.NewClient(target, append(opts, o.DialOptions...)...)
	if err != nil {
		return nil, fmt.Errorf("setpointclient: dial %s: %w", addr, err)
	}
	return &Client{
		AutoscalerServiceClient: setpointv1.NewAutoscalerServiceClient(conn),
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

// Config loads the files into a TLS configuration (TLS 1.2 or later).
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
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}
