// Package door is the contract between the server and its web console:
// the console's JSON endpoints make gRPC calls, as the browser, on an
// in-memory connection to the server's own gRPC server, so every one
// passes the server's whole admission (package transport is the
// server's side). This package holds what both sides share: the metadata that
// carries a browser's identity on that connection (honoured there only),
// and how the console dials it. (Who the caller is, the console asks the
// SessionService generated from proto/setpoint/console/v1.)
package door

import (
	"context"
	"net"
	"net/http"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/test/bufconn"
)

// The metadata of a console call, honoured on the door's connection only.
const (
	// PeerKey carries the browser's address, host:port.
	PeerKey = "setpoint-console-peer"
	// CertKey carries the client certificate the HTTP server verified,
	// DER.
	CertKey = "setpoint-console-cert-bin"
	// TLSKey is "1" when the browser's request came over TLS.
	TLSKey = "setpoint-console-tls"
)

// Buffer is the in-memory connection's buffer in each direction, in bytes.
const Buffer = 256 << 10

// Dial returns a client connection to the gRPC server through l, whose
// messages may be maxMsg bytes long.
func Dial(l *bufconn.Listener, maxMsg int) (*grpc.ClientConn, error) {
	return grpc.NewClient("passthrough:///setpoint-console",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return l.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMsg), grpc.MaxCallSendMsgSize(maxMsg)),
	)
}

// Context returns r's context carrying r's identity as the outgoing
// metadata of a console call: its Authorization header, its verified
// client certificate, its address and whether it came over TLS.
func Context(r *http.Request) context.Context {
	md := map[string]string{PeerKey: r.RemoteAddr}
	if a := r.Header.Get("Authorization"); a != "" {
		md["authorization"] = a
	}
	if r.TLS != nil {
		md[TLSKey] = "1"
		if len(r.TLS.VerifiedChains) > 0 && len(r.TLS.VerifiedChains[0]) > 0 {
			md[CertKey] = string(r.TLS.VerifiedChains[0][0].Raw)
		}
	}
	return metadata.NewOutgoingContext(r.Context(), metadata.New(md))
}
