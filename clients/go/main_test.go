package setpointclient_test

import (
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/setpointhq/setpoint/internal/servertest"
	"github.com/setpointhq/setpoint/internal/testpki"
	"github.com/setpointhq/setpoint/server"
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
	plain, err := servertest.Run(servertest.Config{Dir: dir, Options: server.Options{Now: func() time.Time { return exampleNow }}})
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
	secure, err := servertest.Run(servertest.Config{Dir: tlsDir, Options: server.Options{Now: func() time.Time { return exampleNow }, TLS: tc}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	addr, serverAddr = plain.Addr, secure.Addr
	code := m.Run()
	for _, stop := range []func() error{plain.Stop, secure.Stop} {
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

// writePKI writes a CA and a client certificate into dir (setting caFile,
// certFile, keyFile) and returns a server configuration that requires
// certificates of that CA.
func writePKI(dir string) (*tls.Config, error) {
	ca, err := testpki.NewCA("setpoint-example-ca")
	if err != nil {
		return nil, err
	}
	caFile = filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, ca.PEM, 0o600); err != nil {
		return nil, err
	}
	client, err := ca.Sign(testpki.Leaf{CommonName: "platform"})
	if err != nil {
		return nil, err
	}
	if certFile, keyFile, err = client.WriteFiles(dir, "platform"); err != nil {
		return nil, err
	}
	serving, err := ca.Sign(testpki.Leaf{CommonName: "setpoint", Server: true, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}})
	if err != nil {
		return nil, err
	}
	cert := serving.Cert
	return &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: ca.Pool()}, nil
}

// startServer runs a real server for the test's duration.
func startServer(t *testing.T, o server.Options) string {
	t.Helper()
	return servertest.Start(t, servertest.Config{Options: o}).Addr
}
