package conformance

import (
	"errors"

	"github.com/setpointhq/setpoint/internal/servertest"
	"github.com/setpointhq/setpoint/internal/testkit"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"github.com/setpointhq/setpoint/server"
	"github.com/setpointhq/setpoint/store"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// Clock is the server's injected clock: the runner moves it to each step's
// time before calling the server.
type Clock = testkit.Clock

// Harness is a Setpoint server on a loopback TCP port over a fresh bbolt
// store, with an injected clock, and a client connected to it.
type Harness struct {
	// Client calls the server.
	Client setpointv1.AutoscalerServiceClient
	// Clock is the server's clock.
	Clock *Clock

	conn   *grpc.ClientConn
	server *servertest.Server
}

// Start starts a server whose store is a new file in dir. Stop releases it.
func Start(dir string) (*Harness, error) { return StartOn(dir, nil) }

// StartOn starts a server on st (another backend, such as etcd) instead of
// the file in dir, when st is not nil; Stop does not close st.
func StartOn(dir string, st store.Store) (*Harness, error) {
	h := &Harness{Clock: &Clock{}}
	cfg := servertest.Config{Dir: dir, Options: server.Options{
		Now:         h.Clock.Now,
		ExpireAfter: -1, // scenario times are far from each other; nothing expires
	}}
	if st != nil {
		cfg.Wrap = func(store.Store) store.Store { return st }
	}
	srv, err := servertest.Run(cfg)
	if err != nil {
		return nil, err
	}
	h.server = srv
	h.conn, err = grpc.NewClient(srv.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, errors.Join(err, srv.Stop())
	}
	h.Client = setpointv1.NewAutoscalerServiceClient(h.conn)
	return h, nil
}

// Stop closes the client, shuts the server down and closes the store.
func (h *Harness) Stop() error {
	return errors.Join(h.conn.Close(), h.server.Stop())
}
