package setpointclient_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/setpointhq/setpoint/internal/kubetest/pki"
	"github.com/setpointhq/setpoint/server"
	"github.com/setpointhq/setpoint/store"
	"go.uber.org/goleak"
)

// addr is the address of the real server the examples call; its clock is
// fixed at exampleNow, the instant of testdata/examples/recommend.json.
// serverAddr is a second one, over its own store, that requires mutual TLS:
// caFile verifies its certificate (for 127.0.0.1), certFile and keyFile
// are a client certificate.
var addr, serverAddr, caFile, certFile, keyFile string

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
	tc, err := writePKI(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	tlsDir := filepath.Join(dir, "tls")
	os.Mkdir(tlsDir, 0o700)
	var stopTLS func() error
	serverAddr, stopTLS, err = serve(tlsDir, server.Options{Now: func() time.Time { return exampleNow }, TLS: tc}, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	for _, stop := range []func() error{stop, stopTLS} {
		if err := stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stop:", err)
			code = 1
		}
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
	srv, err := server.New(st, o)
	if err != nil {
		lis.Close()
		st.Close()
		return "", nil, err
	}
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

// writePKI writes a CA and a client certificate into dir (setting caFile,
// certFile, keyFile) and returns a server configuration that requires
// certificates of that CA.
func writePKI(dir string) (*tls.Config, error) {
	ca, err := pki.NewCA("setpoint-example-ca")
	if err != nil {
		return nil, err
	}
	caFile = filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, ca.CertPEM(), 0o600); err != nil {
		return nil, err
	}
	client, err := ca.ClientCert("platform")
	if err != nil {
		return nil, err
	}
	if certFile, keyFile, err = client.WriteFiles(dir, "platform"); err != nil {
		return nil, err
	}
	serving, err := ca.ServingCert("setpoint", nil, []net.IP{net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return nil, err
	}
	cert, err := serving.TLSCertificate()
	if err != nil {
		return nil, err
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: ca.Pool()}, nil
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
