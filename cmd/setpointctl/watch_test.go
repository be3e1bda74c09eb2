package main

import (
	"bytes"
	"context"
	"io"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
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
	for _, l := range lines[1:] {
		if !strings.Contains(l, "dev/shop/web   decision   2 → 3: cpu resource utilization") {
			t.Errorf("row %q", l)
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
