// Command testserver runs real Setpoint servers on loopback for the
// TypeScript client's tests (clients/ts/test): one in plaintext, one with
// mutual TLS, both over fresh bbolt stores in a temporary directory, both
// requiring the bearer token "s3cret" (an admin), with the clock fixed at
// 2026-03-01T12:00:00Z, the instant of testdata/examples/recommend.json.
//
// It prints one JSON line on stdout,
//
//	{"plaintext": "127.0.0.1:PORT", "tls": "127.0.0.1:PORT", "dir": "…"}
//
// where dir holds ca.pem, client.crt and client.key for the TLS server
// (whose certificate is for "setpoint.test" and 127.0.0.1), and serves until its
// standard input closes, so it never outlives the test that started it.
package main

import (
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/setpointhq/setpoint/internal/servertest"
	"github.com/setpointhq/setpoint/internal/testpki"
	"github.com/setpointhq/setpoint/server"
)

// Token is the admin bearer token both servers accept.
const Token = "s3cret"

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "testserver:", err)
		os.Exit(1)
	}
}

func run() error {
	dir, err := os.MkdirTemp("", "setpoint-ts-test")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	tc, err := writePKI(dir)
	if err != nil {
		return err
	}
	plain, stopPlain, err := serve(filepath.Join(dir, "plain.db"), nil)
	if err != nil {
		return err
	}
	secure, stopSecure, err := serve(filepath.Join(dir, "tls.db"), tc)
	if err != nil {
		return errors.Join(err, stopPlain())
	}
	line, _ := json.Marshal(map[string]string{"plaintext": plain, "tls": secure, "dir": dir})
	fmt.Println(string(line))
	io.Copy(io.Discard, os.Stdin) // until the test closes stdin or exits
	return errors.Join(stopPlain(), stopSecure())
}

// serve runs a server over a new store at path (servertest.Run); stop
// shuts it down and closes the store.
func serve(path string, tc *tls.Config) (addr string, stop func() error, err error) {
	sum := sha256.Sum256([]byte(Token))
	principals := path + ".principals.json"
	if err := os.WriteFile(principals, []byte(`{"principals": [{"name": "ops", "role": "admin", "token_sha256": ["`+hex.EncodeToString(sum[:])+`"]}]}`), 0o600); err != nil {
		return "", nil, err
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	auth, err := server.NewAuthenticator(principals, server.ReloadOptions{Logger: log})
	if err != nil {
		return "", nil, err
	}
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	srv, err := servertest.Run(servertest.Config{Path: path, Options: server.Options{
		Now: func() time.Time { return now }, Logger: log, Auth: auth, TLS: tc,
	}})
	if err != nil {
		return "", nil, err
	}
	return srv.Addr, srv.Stop, nil
}

// writePKI writes a CA and a client certificate into dir and returns the
// TLS server configuration requiring certificates of that CA.
func writePKI(dir string) (*tls.Config, error) {
	ca, err := testpki.NewCA("setpoint-ts-test-ca")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "ca.pem"), ca.PEM, 0o600); err != nil {
		return nil, err
	}
	client, err := ca.Sign(testpki.Leaf{CommonName: "platform"})
	if err != nil {
		return nil, err
	}
	if _, _, err := client.WriteFiles(dir, "client"); err != nil {
		return nil, err
	}
	serving, err := ca.Sign(testpki.Leaf{CommonName: "setpoint", Server: true, DNSNames: []string{"setpoint.test"}, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}})
	if err != nil {
		return nil, err
	}
	cert := serving.Cert
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    ca.Pool(),
		NextProtos:   []string{"h2"},
	}, nil
}
