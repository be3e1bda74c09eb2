package transport

// The console's door into the gRPC server, the server's side (the contract
// both sides share is package door). The console's JSON endpoints
// (package console) make their calls as gRPC calls on an in-memory connection
// to the server's own gRPC server, so each passes the same admission as a
// call over TCP: the tap handle (authentication, rate limits, the
// per-principal call bound), the interceptor chain (metrics, access log,
// authorization, size budgets, validation, fair queues, recovery) and the
// stream bounds. Nothing of it is implemented twice.
//
// The browser's identity travels with each call as metadata that only
// this connection's calls may carry: the verified client certificate the
// HTTP server saw, the browser's address, whether the request came over
// TLS, and the browser's bearer token as it sent it. The tap handle puts
// the first three where a TCP connection's are (the call's peer), so
// authentication, the per-address limits and the audit see the browser.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"

	"github.com/setpointhq/setpoint/server/door"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/test/bufconn"
)

// Door is the gRPC server's in-memory listener for the console: its
// connections are recognised by Creds (doorConn); package door dials it.
type Door struct{ *bufconn.Listener }

// NewDoor returns a door whose connections buffer size bytes each way.
func NewDoor(size int) Door { return Door{bufconn.Listen(size)} }

// Accept returns the next console connection.
func (l Door) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return doorConn{c}, nil
}

// doorConn is the server side of the console's in-memory connection.
type doorConn struct{ net.Conn }

// doorInfo is the AuthInfo of a console call: the in-memory connection
// has no handshake; the tap handle replaces it with the browser's
// (doorPeer).
type doorInfo struct {
	credentials.CommonAuthInfo
	// tls says whether the browser's request came over TLS.
	tls bool
}

// AuthType implements credentials.AuthInfo.
func (doorInfo) AuthType() string { return "setpoint-console" }

// doorAddr is a browser's address, as the HTTP server saw it.
type doorAddr string

// Network implements net.Addr.
func (doorAddr) Network() string { return "tcp" }

// String implements net.Addr.
func (a doorAddr) String() string { return string(a) }

// BrowserPeer returns ctx with the browser's peer in place of the
// in-memory connection's when ctx is a console call's (its peer's
// AuthInfo is doorInfo); other calls' ctx as it is. The browser's
// certificate becomes the peer's verified TLS certificate, as a TCP
// connection's would be.
func BrowserPeer(ctx context.Context, md metadata.MD) context.Context {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return ctx
	}
	if _, ok := p.AuthInfo.(doorInfo); !ok {
		return ctx
	}
	first := func(k string) string {
		if v := md.Get(k); len(v) > 0 {
			return v[0]
		}
		return ""
	}
	browser := &peer.Peer{Addr: doorAddr(first(door.PeerKey)), LocalAddr: p.LocalAddr, AuthInfo: doorInfo{tls: first(door.TLSKey) == "1"}}
	if der := first(door.CertKey); der != "" {
		if c, err := x509.ParseCertificate([]byte(der)); err == nil {
			browser.AuthInfo = credentials.TLSInfo{
				State:          tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{c}}, PeerCertificates: []*x509.Certificate{c}},
				CommonAuthInfo: credentials.CommonAuthInfo{SecurityLevel: credentials.PrivacyAndIntegrity},
			}
		}
	}
	return peer.NewContext(ctx, browser)
}
