// Package servertest runs a real Setpoint server for a test or a tool: a
// bbolt store file, a TCP listener on loopback and the server's whole
// interceptor chain. It is the one way the repository's tests, the
// TypeScript client's test server, setpoint-bench and the conformance
// runner start a server.
//
// Run starts one and returns it; Stop shuts it down and closes the store.
// Start does the same for a test and stops the server when the test ends.
// Everything is injectable through Config: the store file and its options
// (or an open store of another backend, such as etcd),
// a wrapper around the store (to inject faults), the listener, and the
// server's Options (clock, logger, TLS, authentication, limits).
package servertest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/setpointhq/setpoint/server"
	"github.com/setpointhq/setpoint/store"
	"github.com/setpointhq/setpoint/store/boltstore"
)

// Config says how to run a server. The zero value runs one over a new
// store file in a new temporary directory, on a new loopback listener,
// with the server's defaults and its logs discarded.
type Config struct {
	// Path is the store file; Dir/setpoint.db when empty.
	Path string
	// Dir is the directory of the store file when Path is empty; a new
	// temporary directory, removed by Stop, when both are empty.
	Dir string
	// Store configures the bbolt store.
	Store boltstore.Options
	// Open, when set, is an open store to serve instead of a file Run
	// opens (Path, Dir and Store are then ignored); Stop closes it.
	Open *boltstore.Store
	// Backend, when set, is an open store of any backend to serve (an
	// etcd store, for several servers sharing one history) instead of a
	// bbolt file: Path, Dir, Store and Open are then ignored,
	// Server.Store is nil, and Stop leaves the store open.
	Backend store.Store
	// Wrap, when set, wraps the store the server is given (for example to
	// inject faults); Server.Store stays the bbolt store.
	Wrap func(store.Store) store.Store
	// Listener is the server's listener; a new one on 127.0.0.1:0 when
	// nil. Stop closes it.
	Listener net.Listener
	// Options configure the server. A nil Logger discards its logs.
	Options server.Options
}

// Server is a running server.
type Server struct {
	// Addr is the server's address (127.0.0.1:port).
	Addr string
	// Path is the store file.
	Path string
	// Store is the server's bbolt store, open until Stop; nil with
	// Config.Backend.
	Store *boltstore.Store
	// Server is the running server.
	Server *server.Server

	temp   string // a temporary directory Stop removes
	cancel context.CancelFunc
	served chan error
	once   sync.Once
	err    error
}

// Run starts a server as cfg says. The caller must call Stop.
func Run(cfg Config) (s *Server, err error) {
	s = &Server{Path: cfg.Path, served: make(chan error, 1)}
	var cleanup []func() error
	defer func() {
		if err != nil {
			for i := len(cleanup) - 1; i >= 0; i-- {
				err = errors.Join(err, cleanup[i]())
			}
			s = nil
		}
	}()
	if cfg.Listener != nil {
		cleanup = append(cleanup, ignoreClosed(cfg.Listener.Close))
	}
	if cfg.Backend != nil {
		s.Path = ""
	} else if cfg.Open != nil {
		s.Store, s.Path = cfg.Open, cfg.Open.Path()
	} else if s.Path == "" {
		dir := cfg.Dir
		if dir == "" {
			if dir, err = os.MkdirTemp("", "setpoint-server-"); err != nil {
				return nil, err
			}
			s.temp = dir
			cleanup = append(cleanup, func() error { return os.RemoveAll(dir) })
		}
		s.Path = filepath.Join(dir, "setpoint.db")
	}
	o := cfg.Options
	var st store.Store = cfg.Backend
	if st == nil {
		if s.Store == nil {
			if s.Store, err = boltstore.Open(s.Path, cfg.Store); err != nil {
				return nil, err
			}
		}
		cleanup = append(cleanup, s.Store.Close)
		st = s.Store
	}
	if cfg.Wrap != nil {
		st = cfg.Wrap(st)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if s.Server, err = server.New(st, o); err != nil {
		return nil, err
	}
	lis := cfg.Listener
	if lis == nil {
		if lis, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			return nil, err
		}
	}
	s.Addr = lis.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	go func() { s.served <- s.Server.Serve(ctx, lis) }()
	// The console's endpoints answer Unavailable until Serve has set up
	// its connection: return once it has (or has failed).
	select {
	case <-s.Server.Serving():
	case err := <-s.served:
		s.served <- err
	}
	return s, nil
}

// ignoreClosed returns close, reporting a listener already closed as
// success.
func ignoreClosed(close func() error) func() error {
	return func() error {
		if err := close(); err != nil && !errors.Is(err, net.ErrClosed) {
			return err
		}
		return nil
	}
}

// Stop shuts the server down gracefully, closes the store and removes a
// temporary directory. It returns the first call's result on every call.
func (s *Server) Stop() error {
	s.once.Do(func() {
		s.cancel()
		var errs []error
		if err := <-s.served; err != nil {
			errs = append(errs, fmt.Errorf("servertest: serve: %w", err))
		}
		if s.Store != nil {
			if err := s.Store.Close(); err != nil {
				errs = append(errs, fmt.Errorf("servertest: close store: %w", err))
			}
		}
		if s.temp != "" {
			errs = append(errs, os.RemoveAll(s.temp))
		}
		s.err = errors.Join(errs...)
	})
	return s.err
}

// Start runs a server as cfg says until the test ends; an error starting
// or stopping it fails the test. An empty cfg.Path and cfg.Dir put the
// store in t.TempDir().
func Start(t testing.TB, cfg Config) *Server {
	t.Helper()
	if cfg.Path == "" && cfg.Dir == "" {
		cfg.Dir = t.TempDir()
	}
	s, err := Run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Error(err)
		}
	})
	return s
}
