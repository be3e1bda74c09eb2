package etcdtest_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/setpointhq/setpoint/internal/etcdtest"
)

// A cut proxy passes no byte either way and closes nothing; Heal delivers
// what it held back, HealReset closes the connections instead.
func TestProxyCutAndHeal(t *testing.T) {
	echo := echoServer(t)
	p := etcdtest.NewProxy(t, echo)
	conn := dial(t, p.Addr)
	r := bufio.NewReader(conn)
	roundTrip := func(line string) error {
		if _, err := io.WriteString(conn, line+"\n"); err != nil {
			return err
		}
		got, err := r.ReadString('\n')
		if err == nil && got != line+"\n" {
			t.Fatalf("echo of %q: %q", line, got)
		}
		return err
	}
	if err := roundTrip("before"); err != nil {
		t.Fatalf("through the proxy before a cut: %v", err)
	}

	p.Cut()
	conn.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if err := roundTrip("during"); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("through a cut proxy: %v, want no answer (a deadline)", err)
	}
	fresh := dial(t, p.Addr)
	io.WriteString(fresh, "new\n")
	fresh.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if _, err := bufio.NewReader(fresh).ReadString('\n'); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a connection opened during the cut: %v, want no answer", err)
	}

	p.Heal()
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if got, err := r.ReadString('\n'); err != nil || got != "during\n" {
		t.Fatalf("after Heal, what the cut held back: %q, %v; want it delivered", got, err)
	}
	if err := roundTrip("after"); err != nil {
		t.Fatalf("after Heal: %v", err)
	}

	p.Cut()
	io.WriteString(conn, "dropped\n")
	p.HealReset()
	if got, err := r.ReadString('\n'); err == nil {
		t.Fatalf("after HealReset, the held connection answered %q; want it closed", got)
	}
	again := dial(t, p.Addr)
	again.SetReadDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(again, "new\n")
	if got, err := bufio.NewReader(again).ReadString('\n'); err != nil || got != "new\n" {
		t.Fatalf("a new connection after HealReset: %q, %v", got, err)
	}
}

// echoServer is a TCP server on loopback that echoes every connection
// back; it is closed at cleanup.
func echoServer(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				io.Copy(c, c)
			}()
		}
	}()
	return l.Addr().String()
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// A delayed proxy passes every chunk, each way, no sooner than the delay
// after it arrived; Delay(0) ends it.
func TestProxyDelay(t *testing.T) {
	echo := echoServer(t)
	p := etcdtest.NewProxy(t, echo)
	conn := dial(t, p.Addr)
	r := bufio.NewReader(conn)
	roundTrip := func(line string) time.Duration {
		began := time.Now()
		if _, err := io.WriteString(conn, line+"\n"); err != nil {
			t.Fatal(err)
		}
		if got, err := r.ReadString('\n'); err != nil || got != line+"\n" {
			t.Fatalf("echo of %q: %q, %v", line, got, err)
		}
		return time.Since(began)
	}
	const d = 150 * time.Millisecond
	p.Delay(d)
	if took := roundTrip("slow"); took < 2*d {
		t.Errorf("a round trip through a proxy delaying %v each way took %v", d, took)
	}
	p.Delay(0)
	roundTrip("fast")
}
