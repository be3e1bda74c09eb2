package server_test

import (
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/setpointhq/setpoint/server"
)

// A decision stamped after the server's clock (the target's last decision
// came from a server whose clock is ahead) is counted every time and
// warned about once a minute; decisions on the server's own clock, and
// concurrent ones a nanosecond apart, are not.
func TestDecisionsAheadOfClock(t *testing.T) {
	var logs syncBuffer
	ts := start(t, setup{opts: server.Options{Logger: slog.New(slog.NewJSONHandler(&logs, nil))}})
	c := ts.client(t)
	metrics := httptest.NewServer(ts.srv.MetricsHandler())
	defer metrics.Close()
	const ahead = "setpoint_server_decisions_ahead_of_clock_total"

	steps := []struct {
		name   string
		target string
		clock  time.Time // the server's clock when it decides
		want   float64   // the counter afterwards
	}{
		{"on the server's clock", "web", t0, 0},
		{"the same clock again: a nanosecond after the last", "web", t0, 0},
		{"the clock an hour behind the target's", "web", t0.Add(-time.Hour), 1},
		{"still behind", "web", t0.Add(-time.Hour), 2},
		{"another target, on the server's clock", "api", t0.Add(-time.Hour), 2},
	}
	for _, st := range steps {
		ts.clock.Set(st.clock)
		if _, err := c.Recommend(t.Context(), request(st.target, 2, st.clock)); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if got := scrape(t, metrics.URL)[ahead]; got != st.want {
			t.Errorf("%s: %s = %v, want %v", st.name, ahead, got, st.want)
		}
	}
	if n := strings.Count(logs.String(), "another server that wrote the target has a clock ahead"); n != 1 {
		t.Errorf("warned %d times, want once (at most once a minute):\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), `"lead":"1h0m0.`) {
		t.Errorf("the warning does not say how far ahead (about an hour):\n%s", logs.String())
	}
}
