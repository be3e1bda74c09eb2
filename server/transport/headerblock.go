// Package transport is the gRPC port's connections, before any call: the
// transport credentials that close a connection whose HTTP/2 header block
// stays unfinished (Creds), and the console's in-memory door into the
// gRPC server (Door), whose calls take the browser's identity
// (BrowserPeer) — the first steps of the server's admission.
package transport

// HTTP/2 header blocks on the gRPC port. grpc-go bounds the size of a
// request's header list (grpc.MaxHeaderListSize: a block over it closes the
// connection) but nothing bounds how long a block may stay unfinished: a
// HEADERS frame without END_HEADERS followed by slow CONTINUATION frames,
// or one HEADERS frame whose payload trickles in, holds the connection's
// reader — and everything decoded so far — until keepalive gives up. A
// request is authenticated only once its header block is complete, so such
// a connection is anonymous. headerDeadline closes it when a block is not
// finished within Options.HeaderTimeout.

import (
	"net"
	"time"

	"google.golang.org/grpc/credentials"
)

// HTTP/2 framing (RFC 9113 §4.1, §6.2, §6.10).
const (
	h2Preface        = len("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
	h2FrameHeader    = 9
	h2Headers        = 0x1
	h2Continuation   = 0x9
	h2FlagEndHeaders = 0x4
)

// Creds returns base (the gRPC port's TLS, or insecure credentials) with
// each connection, after its handshake, closed when a header block stays
// unfinished for headerTimeout; the door's connections (Door) have no
// handshake and are not watched.
func Creds(base credentials.TransportCredentials, headerTimeout time.Duration) credentials.TransportCredentials {
	return headerDeadlineCreds{TransportCredentials: base, timeout: headerTimeout}
}

// headerDeadlineCreds wraps the transport credentials of the gRPC port so
// that each connection, after its handshake, is watched by headerWatch.
type headerDeadlineCreds struct {
	credentials.TransportCredentials
	timeout time.Duration
}

// ServerHandshake runs the wrapped handshake and watches the connection's
// header blocks.
//
// The console's in-memory connection (Door) has no handshake and is not
// watched: the server's own console is its one client.
func (c headerDeadlineCreds) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	if d, ok := raw.(doorConn); ok {
		return d, doorInfo{CommonAuthInfo: credentials.CommonAuthInfo{SecurityLevel: credentials.NoSecurity}}, nil
	}
	conn, info, err := c.TransportCredentials.ServerHandshake(raw)
	if err != nil {
		return conn, info, err
	}
	w := &headerWatch{Conn: conn, timeout: c.timeout, skip: h2Preface}
	w.timer = time.AfterFunc(time.Hour, func() { _ = conn.Close() })
	w.timer.Stop()
	return w, info, nil
}

// Clone returns a copy of c.
func (c headerDeadlineCreds) Clone() credentials.TransportCredentials {
	return headerDeadlineCreds{TransportCredentials: c.TransportCredentials.Clone(), timeout: c.timeout}
}

// headerWatch is a server connection whose client-to-server bytes are
// followed frame by frame (only the 9-byte frame headers are read): a
// header block — a HEADERS frame and its CONTINUATION frames, up to the
// end of the frame that carries END_HEADERS — must be complete within
// timeout of its first byte, or the connection is closed. Read is called
// from one goroutine (the transport's reader); the timer only closes.
type headerWatch struct {
	net.Conn
	timeout time.Duration

	skip    int                 // bytes of the preface or of a frame's payload still to pass
	hdr     [h2FrameHeader]byte // the frame header being read
	hdrN    int                 // its bytes read so far
	open    bool                // a header block is unfinished
	endsNow bool                // the frame being passed ends the block
	timer   *time.Timer         // closes the connection; armed while a block is open
}

// Read reads from the connection and follows the frames read.
func (w *headerWatch) Read(p []byte) (int, error) {
	n, err := w.Conn.Read(p)
	w.follow(p[:n])
	return n, err
}

// follow advances the frame parser over b.
func (w *headerWatch) follow(b []byte) {
	for len(b) > 0 {
		if w.skip > 0 {
			k := min(w.skip, len(b))
			w.skip -= k
			b = b[k:]
			if w.skip == 0 && w.endsNow {
				w.finish()
			}
			continue
		}
		k := copy(w.hdr[w.hdrN:], b)
		w.hdrN += k
		b = b[k:]
		if w.hdrN < h2FrameHeader {
			return
		}
		w.hdrN = 0
		length := int(w.hdr[0])<<16 | int(w.hdr[1])<<8 | int(w.hdr[2])
		typ, flags := w.hdr[3], w.hdr[4]
		if typ == h2Headers && !w.open {
			w.start()
		}
		if w.open && (typ == h2Headers || typ == h2Continuation) && flags&h2FlagEndHeaders != 0 {
			w.endsNow = true
		}
		w.skip = length
		if length == 0 && w.endsNow {
			w.finish()
		}
	}
}

// start arms the deadline of a new header block.
func (w *headerWatch) start() {
	w.open = true
	w.timer.Reset(w.timeout)
}

// finish disarms the deadline: the block is complete.
func (w *headerWatch) finish() {
	w.open, w.endsNow = false, false
	w.timer.Stop()
}

// Close stops the deadline and closes the connection.
func (w *headerWatch) Close() error {
	w.timer.Stop()
	return w.Conn.Close()
}
