// Package securetest runs a real Setpoint server the way production does —
// TLS with optional client certificates and a principals file, with
// certificates generated for the test — so clients (the agent, setpointctl)
// can be tested through their real configuration and dial code.
package securetest

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/setpointhq/setpoint/internal/servertest"
	"github.com/setpointhq/setpoint/internal/testpki"
	"github.com/setpointhq/setpoint/server"
)

// Server is a running server and what its clients need.
type Server struct {
	// Addr is the server's address (127.0.0.1:port); its certificate is
	// valid for "localhost" and 127.0.0.1.
	Addr string
	// Dir is a temporary directory for the test's files.
	Dir string
	// ServerCA signed the server certificate; ClientCA verifies client
	// certificates.
	ServerCA, ClientCA *testpki.CA
}

// Start runs a server until the test ends, authenticating with the
// principals file content principals (YAML or JSON).
func Start(t testing.TB, principals string) *Server {
	t.Helper()
	s := &Server{Dir: t.TempDir(), ServerCA: testpki.TestCA(t, "server CA"), ClientCA: testpki.TestCA(t, "client CA")}
	files := testpki.Write(t, filepath.Join(s.Dir, "server"), s.ClientCA, s.ServerCA.Issue(t, testpki.Leaf{CommonName: "localhost", Server: true}))
	path := filepath.Join(s.Dir, "principals.yaml")
	testpki.WriteFile(t, path, []byte(principals))
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	tc, err := server.NewTLSConfig(server.TLSFiles{Cert: files.Cert, Key: files.Key, ClientCA: files.CA}, server.ReloadOptions{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	auth, err := server.NewAuthenticator(path, server.ReloadOptions{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	s.Addr = servertest.Start(t, servertest.Config{Dir: s.Dir, Options: server.Options{TLS: tc, Auth: auth, Logger: log}}).Addr
	return s
}

// Client issues a client certificate with the URI SAN uri and writes it,
// its key and the server CA (the CA a client must trust) into a new
// directory.
func (s *Server) Client(t testing.TB, name, uri string) testpki.Files {
	t.Helper()
	return testpki.Write(t, filepath.Join(s.Dir, name), s.ServerCA, s.ClientCA.Issue(t, testpki.Leaf{CommonName: name, URI: uri}))
}

// SHA256 returns the hex SHA-256 of a token, as principals files list it.
func SHA256(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}
