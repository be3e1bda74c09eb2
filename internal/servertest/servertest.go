// Package servertest runs a real Setpoint server — a bbolt store file and a
// TCP listener on loopback — for the length of a test.
package servertest

import (
	"context"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"testing"

	"github.com/setpointhq/setpoint/server"
	"github.com/setpointhq/setpoint/store"
)

// Start serves o over a new store file in dir until the test ends and
// returns the server's address (127.0.0.1:port). A nil o.Logger discards
// the server's logs. At the end of the test the server shuts down and the
// store is closed; an error from either fails the test.
func Start(t testing.TB, dir string, o server.Options) string {
	t.Helper()
	st, err := store.Open(filepath.Join(dir, "setpoint.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	srv, err := server.New(st, o)
	if err != nil {
		st.Close()
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		st.Close()
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, lis) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
		if err := st.Close(); err != nil {
			t.Error(err)
		}
	})
	return lis.Addr().String()
}
