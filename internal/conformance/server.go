package conformance

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"

	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"github.com/setpointhq/setpoint/server"
	"github.com/setpointhq/setpoint/store"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// Harness is a Setpoint server on a loopback TCP port over a fresh bbolt
// store, with an injected clock, and a client connected to it.
type Harness struct {
	// Client calls the server.
	Client setpointv1.AutoscalerServiceClient
	// Clock is the server's clock.
	Clock *Clock

	conn   *grpc.ClientConn
	store  *store.Bolt
	cancel context.CancelFunc
	served chan error
}

// Start starts a server whose store is a new file in dir. Stop releases it.
func Start(dir string) (*Harness, error) {
	st, err := store.Open(filepath.Join(dir, "setpoint.db"), store.Options{})
	if err != nil {
		return nil, err
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		_ = st.Close()
		return nil, err
	}
	h := &Harness{Clock: &Clock{}, store: st, served: make(chan error, 1)}
	srv, err := server.New(st, server.Options{
		Now:         h.Clock.Now,
		Logger:      slog.New(slog.NewTextHandler(io.Discard, nil)),
		ExpireAfter: -1, // scenario times are far from each other; nothing expires
	})
	if err != nil {
		lis.Close()
		st.Close()
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	go func() { h.served <- srv.Serve(ctx, lis) }()
	h.conn, err = grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		_ = h.Stop()
		return nil, err
	}
	h.Client = setpointv1.NewAutoscalerServiceClient(h.conn)
	return h, nil
}

// Stop closes the client, shuts the server down and closes the store.
func (h *Harness) Stop() error {
	var errs []error
	if h.conn != nil {
		errs = append(errs, h.conn.Close())
	}
	h.cancel()
	if err := <-h.served; err != nil {
		errs = append(errs, fmt.Errorf("serve: %w", err))
	}
	errs = append(errs, h.store.Close())
	return errors.Join(errs...)
}
