package servertest_test

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/setpointhq/setpoint/internal/servertest"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"github.com/setpointhq/setpoint/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestRunServesAndStops: Run serves the API over its own temporary store;
// Stop shuts it down, closes the store and removes the directory, and a
// second Stop answers as the first.
func TestRunServesAndStops(t *testing.T) {
	srv, err := servertest.Run(servertest.Config{})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(srv.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	_, err = setpointv1.NewAutoscalerServiceClient(conn).ListTargets(t.Context(), &setpointv1.ListTargetsRequest{})
	conn.Close()
	if err != nil {
		t.Fatalf("ListTargets: %v", err)
	}
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := srv.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
	if err := srv.Store.Close(); !errors.Is(err, store.ErrClosed) {
		t.Errorf("the store after Stop: Close = %v, want ErrClosed", err)
	}
	if _, err := os.Stat(filepath.Dir(srv.Path)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the temporary directory is left after Stop: %v", err)
	}
}

// TestRunFailsCleanly: when the store cannot be opened, Run returns the
// error and closes the listener it was given.
func TestRunFailsCleanly(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// Were the listener left open, Accept would fail by this deadline.
	if err := lis.(*net.TCPListener).SetDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	srv, err := servertest.Run(servertest.Config{Path: filepath.Join(t.TempDir(), "missing", "s.db"), Listener: lis})
	if err == nil || srv != nil {
		t.Fatalf("Run over a store in a missing directory = %v, %v; want an error", srv, err)
	}
	if _, err := lis.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("the listener after a failed Run: Accept = %v, want net.ErrClosed", err)
	}
}
