package setpointclient_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/setpointhq/setpoint/server"
	"github.com/setpointhq/setpoint/store"
	"go.uber.org/goleak"
)

// addr is the address of the real server the examples call; its clock is
// fixed at exampleNow, the instant of testdata/examples/recommend.json.
var addr string

var exampleNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "setpointclient")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	var stop func() error
	addr, stop, err = serve(dir, server.Options{Now: func() time.Time { return exampleNow }}, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	if err := stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stop:", err)
		code = 1
	}
	os.RemoveAll(dir)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// serve runs a real server over a new bbolt store in dir, on lis or a new
// loopback listener; stop shuts it down and closes the store.
func serve(dir string, o server.Options, lis net.Listener) (addr string, stop func() error, err error) {
	st, err := store.Open(filepath.Join(dir, "setpoint.db"), store.Options{})
	if err != nil {
		return "", nil, err
	}
	if lis == nil {
		if lis, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			st.Close()
			return "", nil, err
		}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	srv := server.New(st, o)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, lis) }()
	return lis.Addr().String(), func() error {
		cancel()
		err := <-done
		if cerr := st.Close(); err == nil {
			err = cerr
		}
		return err
	}, nil
}

// startServer runs a real server for the test's duration.
func startServer(t *testing.T, o server.Options) string {
	t.Helper()
	addr, stop, err := serve(t.TempDir(), o, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
	})
	return addr
}
