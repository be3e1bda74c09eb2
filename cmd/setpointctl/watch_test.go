package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/setpointhq/setpoint/internal/servertest"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"github.com/setpointhq/setpoint/server"
	"google.golang.org/protobuf/encoding/protojson"
)

// syncBuffer is a buffer the watch command writes while the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestWatch follows decisions live, then replays them with --resume-after.
func TestWatch(t *testing.T) {
	addr := startServer(t)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	var out syncBuffer
	done := make(chan error, 1)
	go func() {
		c := &cli{stdin: strings.NewReader(""), stdout: &out, stderr: io.Discard, now: time.Now}
		done <- c.run(ctx, []string{"-addr", addr, "watch", "--cluster", "dev", "--count", "2"})
	}()
	// Until the watch is up, decisions pass unseen: decide until it exits
	// after two changes.
	var err error
	for waiting := true; waiting; {
		if _, err := ctl(ctx, addr, "recommend", "-f", example); err != nil {
			t.Fatal(err)
		}
		select {
		case err = <-done:
			waiting = false
		case <-time.After(50 * time.Millisecond):
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "REV") {
		t.Fatalf("watch --count 2 printed\n%s", out.String())
	}
	// Rows are printed one at a time, yet line up under the header.
	for _, l := range lines[1:] {
		for _, col := range []struct{ header, cell string }{{"TARGET", "dev/shop/web"}, {"CHANGE", "decision"}, {"DETAIL", "2 → 3: cpu resource utilization"}} {
			if h, c := strings.Index(lines[0], col.header), strings.Index(l, col.cell); h != c {
				t.Errorf("%s starts at %d in row %q, its header at %d", col.cell, c, l, h)
			}
		}
	}
	first, err := strconv.ParseUint(strings.Fields(lines[1])[0], 10, 64)
	if err != nil {
		t.Fatal(err)
	}

	// Everything after the first change is still kept: a resumed watch
	// replays it at once, oldest first.
	got, err := ctl(ctx, addr, "watch", "--resume-after", strconv.FormatUint(first, 10), "--count", "1", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var ch setpointv1.WatchResponse
	if err := protojson.Unmarshal([]byte(strings.TrimSpace(got)), &ch); err != nil {
		t.Fatalf("-o json printed %q: %v", got, err)
	}
	if ch.GetRevision() <= first || ch.GetDecision().GetDesiredReplicas() != 3 {
		t.Errorf("resumed after %d: %v", first, &ch)
	}
	if _, err := ctl(ctx, addr, "watch", "--namespace", "shop"); err == nil {
		t.Error("watch --namespace without --cluster succeeded")
	}
}

// TestWatchWaitsForTheServer: a watch started before its server says on
// stderr that nothing answers, then that it is connected once the server
// is up, and prints the change that follows.
func TestWatchWaitsForTheServer(t *testing.T) {
	addr := closedAddr(t)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	var stdout, stderr syncBuffer
	done := make(chan int, 1)
	go func() {
		c := &cli{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr, now: time.Now}
		done <- c.execute(ctx, []string{"--addr", addr, "watch", "--count", "1"})
	}()
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for !cond() {
			select {
			case <-ctx.Done():
				t.Fatalf("%s: stdout\n%s\nstderr\n%s", what, stdout.String(), stderr.String())
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	waitFor("no report of the down server", func() bool {
		return strings.Contains(stderr.String(), "watch: no Setpoint server answers at "+addr+" (connection refused)")
	})
	if strings.Count(stderr.String(), "no Setpoint server answers") != 1 {
		t.Errorf("the outage was reported more than once:\n%s", stderr.String())
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	servertest.Start(t, servertest.Config{Listener: lis, Options: server.Options{Now: func() time.Time { return exampleNow }}})
	waitFor("no report of the reconnection", func() bool {
		return strings.Contains(stderr.String(), "watch: connected to "+addr+" again")
	})
	if _, err := ctl(ctx, addr, "recommend", "-f", example); err != nil {
		t.Fatal(err)
	}
	if code := <-done; code != exitOK {
		t.Fatalf("watch exited %d: %s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "dev/shop/web") {
		t.Errorf("watch printed\n%s", stdout.String())
	}
}
