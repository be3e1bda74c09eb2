package server_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/setpointhq/setpoint/internal/testkit"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"github.com/setpointhq/setpoint/server"
	"github.com/setpointhq/setpoint/store"
	"github.com/setpointhq/setpoint/store/boltstore"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// TestGracefulShutdown: calls in flight when shutdown begins finish and are
// stored; health turns NOT_SERVING; new calls are refused with
// Unavailable, on the existing connection and on a new one; after the
// restart every acknowledged decision is there.
func TestGracefulShutdown(t *testing.T) {
	const inFlight = 5
	// entered has room for unexpected calls, so that one the server
	// wrongly admits fails the test instead of hanging it.
	fs := &faultStore{entered: make(chan struct{}, 100), release: make(chan struct{})}
	ts := start(t, setup{wrap: func(s store.Store) store.Store { fs.Store = s; return fs }})
	conn := dial(t, ts.addr)
	c := setpointv1.NewAutoscalerServiceClient(conn)

	// Health is watched from before the shutdown.
	watchCtx, stopWatch := context.WithCancel(t.Context())
	defer stopWatch()
	watch, err := healthpb.NewHealthClient(conn).Watch(watchCtx, &healthpb.HealthCheckRequest{Service: setpointv1.AutoscalerService_ServiceDesc.ServiceName})
	if err != nil {
		t.Fatal(err)
	}
	if h, err := watch.Recv(); err != nil || h.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health before shutdown: %v, %v", h, err)
	}

	results := make(chan error, inFlight)
	for i := range inFlight {
		go func() {
			_, err := c.Recommend(context.Background(), request(fmt.Sprintf("inflight-%d", i), 2, t0))
			results <- err
		}()
	}
	for range inFlight {
		<-fs.entered // every call is inside the store, waiting
	}

	stopped := make(chan struct{})
	go func() { ts.stop(t); close(stopped) }()

	if h, err := watch.Recv(); err != nil || h.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("health after shutdown began: %v, %v; want NOT_SERVING", h, err)
	}
	stopWatch() // a watcher would otherwise hold GracefulStop until its timeout

	// New calls are refused, cleanly: Unavailable, which clients retry.
	// Once GracefulStop has begun, the listener is closed (a new
	// connection fails) and the old connection has been told to go away.
	testkit.Eventually(t, 5*time.Second, "the listener to close", func() error {
		c, err := net.Dial("tcp", ts.addr)
		if err != nil {
			return nil
		}
		c.Close()
		return errors.New("a new connection is accepted")
	})
	testkit.Eventually(t, 5*time.Second, "the old connection to be told to go away", func() error {
		if s := conn.GetState(); s == connectivity.Ready {
			return fmt.Errorf("connection %v", s)
		}
		return nil
	})
	if _, err := c.Recommend(t.Context(), request("late", 2, t0)); status.Code(err) != codes.Unavailable {
		t.Errorf("Recommend on the old connection during shutdown: %v, want Unavailable", err)
	}
	if _, err := ts.client(t).Recommend(t.Context(), request("late", 2, t0)); status.Code(err) != codes.Unavailable {
		t.Errorf("Recommend on a new connection during shutdown: %v, want Unavailable", err)
	}
	select {
	case <-stopped:
		t.Fatal("the server stopped with calls in flight")
	default:
	}

	if n := len(fs.entered); n > 0 {
		t.Errorf("%d calls made after the shutdown began reached the store", n)
	}
	close(fs.release)
	for range inFlight {
		if err := <-results; err != nil {
			t.Errorf("a call in flight at shutdown failed: %v", err)
		}
	}
	<-stopped

	again := start(t, setup{path: ts.path})
	ac := again.client(t)
	for i := range inFlight {
		if _, err := ac.GetTarget(t.Context(), &setpointv1.GetTargetRequest{Target: key(fmt.Sprintf("inflight-%d", i))}); err != nil {
			t.Errorf("inflight-%d after restart: %v", i, err)
		}
	}
	if _, err := ac.GetTarget(t.Context(), &setpointv1.GetTargetRequest{Target: key("late")}); status.Code(err) != codes.NotFound {
		t.Errorf("a refused call was stored: %v", err)
	}
}

// TestShutdownTimeout: a call that does not finish within
// Options.ShutdownTimeout is cut off, Serve returns, and the store closes
// cleanly; the cut-off call was never acknowledged.
func TestShutdownTimeout(t *testing.T) {
	fs := &faultStore{entered: make(chan struct{}), release: make(chan struct{})}
	ts := start(t, setup{opts: server.Options{ShutdownTimeout: 100 * time.Millisecond}, wrap: func(s store.Store) store.Store { fs.Store = s; return fs }})
	c := ts.client(t)
	result := make(chan error, 1)
	go func() {
		_, err := c.Recommend(context.Background(), request("stuck", 2, t0))
		result <- err
	}()
	<-fs.entered
	stopped := make(chan struct{})
	began := time.Now()
	go func() { ts.stop(t); close(stopped) }()
	if err := <-result; status.Code(err) != codes.Unavailable && status.Code(err) != codes.Canceled {
		t.Errorf("the stuck call: %v, want Unavailable or Canceled", err)
	}
	close(fs.release) // the handler goroutine finishes; its write may or may not land
	<-stopped
	if took := time.Since(began); took > 5*time.Second {
		t.Errorf("shutdown took %v with a 100ms timeout", took)
	}
}

// TestShutdownEndsWatches: a Watch stream, which never ends by itself,
// does not hold the graceful shutdown until its timeout; the watcher is
// told Unavailable with where to resume.
func TestShutdownEndsWatches(t *testing.T) {
	ts := start(t, setup{opts: server.Options{ShutdownTimeout: time.Minute}})
	c := ts.client(t)
	if _, err := c.Recommend(t.Context(), request("web", 2, t0)); err != nil {
		t.Fatal(err)
	}
	watch, err := c.Watch(t.Context(), &setpointv1.WatchRequest{Cluster: "eu1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := watch.Header(); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	stopped := make(chan struct{})
	go func() { ts.stop(t); close(stopped) }()
	_, err = watch.Recv()
	if status.Code(err) != codes.Unavailable || !strings.Contains(status.Convert(err).Message(), "resume_after") {
		t.Errorf("watch at shutdown: %v, want Unavailable saying where to resume", err)
	}
	<-stopped
	if took := time.Since(began); took > 10*time.Second {
		t.Errorf("shutdown with a watcher took %v", took)
	}
}

// TestServeEndsItsGoroutines: the gRPC server's stream workers, and every
// other goroutine Serve starts, end however Serve ends — its context
// cancelled or its listener closed — and a server that never serves
// starts none.
func TestServeEndsItsGoroutines(t *testing.T) {
	for _, tc := range []struct {
		name string
		end  func(cancel context.CancelFunc, lis net.Listener)
	}{
		{name: "context cancelled", end: func(cancel context.CancelFunc, _ net.Listener) { cancel() }},
		{name: "listener closed", end: func(_ context.CancelFunc, lis net.Listener) { lis.Close() }},
		{name: "never served"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := goleak.IgnoreCurrent()
			st, err := boltstore.Open(filepath.Join(t.TempDir(), "s.db"), boltstore.Options{})
			if err != nil {
				t.Fatal(err)
			}
			srv, err := server.New(st, server.Options{StreamWorkers: 8, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err != nil {
				t.Fatal(err)
			}
			if tc.end != nil {
				lis, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				served := make(chan error, 1)
				go func() { served <- srv.Serve(ctx, lis) }()
				conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
				if err != nil {
					t.Fatal(err)
				}
				if _, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}, grpc.WaitForReady(true)); err != nil {
					t.Fatal(err)
				}
				conn.Close()
				tc.end(cancel, lis)
				select {
				case <-served: // nil or the listener's error: either way it ended
				case <-time.After(10 * time.Second):
					t.Fatal("Serve did not return")
				}
			}
			if err := st.Close(); err != nil {
				t.Fatal(err)
			}
			if err := goleak.Find(before); err != nil {
				t.Error(err)
			}
		})
	}
}
