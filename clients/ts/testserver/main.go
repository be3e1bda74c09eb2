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
	"context"
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

	"github.com/setpointhq/setpoint/internal/kubetest/pki"
	"github.com/setpointhq/setpoint/server"
	"github.com/setpointhq/setpoint/store"
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
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	plain, stopPlain, err := serve(ctx, filepath.Join(dir, "plain.db"), nil)
	if err != nil {
		return err
	}
	secure, stopSecure, err := serve(ctx, filepath.Join(dir, "tls.db"), tc)
	if err != nil {
		return errors.Join(err, stopPlain())
	}
	line, _ := json.Marshal(map[string]string{"plaintext": plain, "tls": secure, "dir": dir})
	fmt.Println(string(line))
	io.Copy(io.Discard, os.Stdin) // until the test closes stdin or exits
	cancel()
	return errors.Join(stopPlain(), stopSecure())
}

// serve runs a server over a new store at path until ctx ends; stop waits
// for it and closes the store.
func serve(ctx context.Context, path string, tc *tls.Config) (addr string, stop func() error, err error) {
	st, err := store.Open(path, store.Options{})
	if err != nil {
		return "", nil, err
	}
	sum := sha256.Sum256([]byte(Token))
	principals := path + ".principals.json"
	if err := os.WriteFile(principals, []byte(`{"principals": [{"name": "ops", "role": "admin", "token_sha256": ["`+hex.EncodeToString(sum[:])+`"]}]}`), 0o600); err != nil {
		return "", nil, errors.Join(err, st.Close())
	}
	auth, err := server.NewAuthenticator(principals, server.ReloadOptions{})
	if err != nil {
		return "", nil, errors.Join(err, st.Close())
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, errors.Join(err, st.Close())
	}
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	srv, err := server.New(st, server.Options{
		Now:    func() time.Time { return now },
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Auth:   auth,
		TLS:    tc,
	})
	if err != nil {
		return "", nil, errors.Join(err, st.Close())
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, lis) }()
	return lis.Addr().String(), func() error { return errors.Join(<-done, st.Close()) }, nil
}

// writePKI writes a CA and a client certificate into dir and returns the
// TLS server configuration requiring certificates of that CA.
func writePKI(dir string) (*tls.Config, error) {
	ca, err := pki.NewCA("setpoint-ts-test-ca")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "ca.pem"), ca.CertPEM(), 0o600); err != nil {
		return nil, err
	}
	client, err := ca.ClientCert("platform")
	if err != nil {
		return nil, err
	}
	if _, _, err := client.WriteFiles(dir, "client"); err != nil {
		return nil, err
	}
	serving, err := ca.ServingCert("setpoint", []string{"setpoint.test"}, []net.IP{net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return nil, err
	}
	cert, err := serving.TLSCertificate()
	if err != nil {
		return nil, err
	}
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    ca.Pool(),
		NextProtos:   []string{"h2"},
	}, nil
}
