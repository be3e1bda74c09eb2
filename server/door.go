package server

// The console's door into the gRPC server. The console's JSON endpoints
// (console.go) make their calls as gRPC calls on an in-memory connection
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
	"net/http"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/test/bufconn"
)

// The metadata of a console call (door.go), honoured on the console's
// in-memory connection only.
const (
	doorPeer = "setpoint-console-peer"     // the browser's address, host:port
	doorCert = "setpoint-console-cert-bin" // the verified client certificate, DER
	doorTLS  = "setpoint-console-tls"      // "1" when the browser's request came over TLS
)

// doorBuffer is the in-memory connection's buffer in each direction.
const doorBuffer = 256 << 10

// doorListener is the gRPC server's in-memory listener for the console:
// its connections are recognised by headerDeadlineCreds (doorConn).
type doorListener struct{ *bufconn.Listener }

// Accept returns the next console connection.
func (l doorListener) Accept() (net.Conn, error) {
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

// dialDoor returns a client connection to the gRPC server through l.
func dialDoor(l *bufconn.Listener, maxMsg int) (*grpc.ClientConn, error) {
	return grpc.NewClient("passthrough:///setpoint-console",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return l.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMsg), grpc.MaxCallSendMsgSize(maxMsg)),
	)
}

// doorContext returns r's context carrying r's identity as the outgoing
// metadata of a console call: its bearer token, its verified client
// certificate, its address and whether it came over TLS.
func doorContext(r *http.Request) context.Context {
	md := metadata.MD{doorPeer: {r.RemoteAddr}}
	if a := r.Header.Get("Authorization"); a != "" {
		md.Set("authorization", a)
	}
	if r.TLS != nil {
		md.Set(doorTLS, "1")
		if len(r.TLS.VerifiedChains) > 0 && len(r.TLS.VerifiedChains[0]) > 0 {
			md.Set(doorCert, string(r.TLS.VerifiedChains[0][0].Raw))
		}
	}
	return metadata.NewOutgoingContext(r.Context(), md)
}

// doorPeerContext returns ctx with the browser's peer in place of the
// in-memory connection's when ctx is a console call's (its peer's
// AuthInfo is doorInfo); other calls' ctx as it is. The browser's
// certificate becomes the peer's verified TLS certificate, as a TCP
// connection's would be.
func doorPeerContext(ctx context.Context, md metadata.MD) context.Context {
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
	browser := &peer.Peer{Addr: doorAddr(first(doorPeer)), LocalAddr: p.LocalAddr, AuthInfo: doorInfo{tls: first(doorTLS) == "1"}}
	if der := first(doorCert); der != "" {
		if c, err := x509.ParseCertificate([]byte(der)); err == nil {
			browser.AuthInfo = credentials.TLSInfo{
				State:          tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{c}}, PeerCertificates: []*x509.Certificate{c}},
				CommonAuthInfo: credentials.CommonAuthInfo{SecurityLevel: credentials.PrivacyAndIntegrity},
			}
		}
	}
	return peer.NewContext(ctx, browser)
}
