package etcdtest

import (
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// Proxy is a TCP proxy on loopback in front of one address, which a test
// cuts to stand for a network partition between its clients and that
// address. Cut stops every byte, both ways, on the connections open and
// on new ones, without closing any: to both ends the peer has gone
// silent, as when the network drops packets. Heal lets them pass again,
// the ones held back first (TCP retransmits what a short partition
// dropped); HealReset instead closes the connections the cut held up (a
// partition longer than TCP's retries). Its methods are safe for
// concurrent use. Delay instead holds every chunk for a while: a slow
// network, or a member that answers late.
type Proxy struct {
	// Addr is the address the proxy listens on (host:port).
	Addr   string
	target string
	l      net.Listener

	mu     sync.Mutex
	open   chan struct{} // closed while bytes pass
	delay  time.Duration // how long each chunk is held
	conns  map[net.Conn]struct{}
	closed bool
}

// NewProxy starts a proxy to target (host:port) on a free loopback port;
// it is closed at cleanup.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("etcdtest: proxy: %v", err)
	}
	p := &Proxy{Addr: l.Addr().String(), target: target, l: l, open: make(chan struct{}), conns: map[net.Conn]struct{}{}}
	close(p.open)
	go p.accept()
	t.Cleanup(p.Close)
	return p
}

// Cut stops every byte through the proxy until Heal or HealReset.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.open:
		p.open = make(chan struct{})
	default: // already cut
	}
}

// Delay holds every chunk, each way, for d before passing it on (0: no
// delay), on the connections open and on new ones.
func (p *Proxy) Delay(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.delay = d
}

// held returns how long a chunk is held.
func (p *Proxy) held() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.delay
}

// Heal lets bytes pass again, those held back by the cut first.
func (p *Proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.open:
	default:
		close(p.open)
	}
}

// HealReset closes every connection open now, dropping what the cut held
// back, and lets bytes pass again on new ones.
func (p *Proxy) HealReset() {
	p.mu.Lock()
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.Heal()
}

// Close stops the proxy and closes its connections.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.l.Close()
	p.HealReset()
}

// gate returns the channel that is closed while bytes pass.
func (p *Proxy) gate() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.open
}

// track adds c to the open connections; false once the proxy is closed.
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.conns, c)
}

func (p *Proxy) accept() {
	for {
		down, err := p.l.Accept()
		if err != nil {
			return // closed
		}
		go p.serve(down)
	}
}

// serve connects down to the target and copies both ways. A target that
// refuses (a member that is down) closes down, as the member would.
func (p *Proxy) serve(down net.Conn) {
	if !p.track(down) {
		return
	}
	defer p.untrack(down)
	defer down.Close()
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	if !p.track(up) {
		return
	}
	defer p.untrack(up)
	defer up.Close()
	var wg sync.WaitGroup
	wg.Go(func() { p.pipe(up, down) })
	p.pipe(down, up)
	wg.Wait()
}

// pipe copies from src to dst, holding each chunk while the proxy is
// cut; when either side ends it closes both.
func (p *Proxy) pipe(dst, src net.Conn) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if d := p.held(); d > 0 {
				time.Sleep(d)
			}
			<-p.gate()
			// A chunk read before a cut may still pass, as a packet
			// already on the wire does.
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil { // EOF, or the other side closed it
			return
		}
	}
}

// Link is one client's way to a cluster: a proxy in front of every
// member. Cutting it partitions that client from the whole cluster while
// the members still reach each other and other clients.
type Link struct {
	// Endpoints are the client URLs of the members through the proxies, in
	// member order: what the client is given instead of Cluster.Endpoints.
	Endpoints []string
	proxies   []*Proxy
}

// Link starts a proxy in front of every member; they are closed at
// cleanup.
func (c *Cluster) Link(t testing.TB) *Link {
	t.Helper()
	l := &Link{}
	for _, ep := range c.Endpoints {
		p := NewProxy(t, strings.TrimPrefix(ep, "http://"))
		l.proxies = append(l.proxies, p)
		l.Endpoints = append(l.Endpoints, "http://"+p.Addr)
	}
	return l
}

// Member is the proxy in front of member i: cutting or delaying it stands
// for that member hung or slow, as the link's client sees it.
func (l *Link) Member(i int) *Proxy { return l.proxies[i] }

// Cut partitions the link's client from every member (Proxy.Cut).
func (l *Link) Cut() {
	for _, p := range l.proxies {
		p.Cut()
	}
}

// Heal ends the partition, delivering what it held back (Proxy.Heal).
func (l *Link) Heal() {
	for _, p := range l.proxies {
		p.Heal()
	}
}

// HealReset ends the partition, closing the connections it held up
// (Proxy.HealReset).
func (l *Link) HealReset() {
	for _, p := range l.proxies {
		p.HealReset()
	}
}
