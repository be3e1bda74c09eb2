package auth

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
)

// TLSFiles name the PEM files of the server's TLS configuration.
type TLSFiles struct {
	// Cert and Key are the server's certificate (chain) and private key.
	Cert, Key string
	// ClientCA, when set, verifies client certificates (mutual TLS): a
	// client presenting one must chain to it. Without RequireClientCert a
	// client may instead present no certificate and authenticate with a
	// bearer token.
	ClientCA string
	// RequireClientCert refuses the handshake of a client without a
	// certificate; it needs ClientCA.
	RequireClientCert bool
}

// tlsState is what one load of the TLS files gives.
type tlsState struct {
	cert      tls.Certificate
	clientCAs *x509.CertPool
}

// NewTLSConfig returns a server TLS configuration (TLS 1.2 or later, ALPN
// h2) over files, which it reads again when they change: a rotated
// certificate, key or client CA is used from the next handshake on (within
// o.Interval), without a restart; connections already open keep theirs.
// Files that fail to load at a check keep the previous ones. The files
// must load now.
func NewTLSConfig(files TLSFiles, o ReloadOptions) (*tls.Config, error) {
	if files.Cert == "" || files.Key == "" {
		return nil, errors.New("server: TLS: certificate and key are required")
	}
	if files.RequireClientCert && files.ClientCA == "" {
		return nil, errors.New("server: TLS: requiring client certificates needs a client CA")
	}
	paths := []string{files.Cert, files.Key}
	if files.ClientCA != "" {
		paths = append(paths, files.ClientCA)
	}
	r, err := newReloader("TLS files", paths, parseTLS, o)
	if err != nil {
		return nil, err
	}
	clientAuth := tls.NoClientCert
	switch {
	case files.RequireClientCert:
		clientAuth = tls.RequireAndVerifyClientCert
	case files.ClientCA != "":
		clientAuth = tls.VerifyClientCertIfGiven
	}
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"h2"},
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			s := r.current()
			return &tls.Config{
				MinVersion:   tls.VersionTLS12,
				NextProtos:   []string{"h2"},
				Certificates: []tls.Certificate{s.cert},
				ClientCAs:    s.clientCAs,
				ClientAuth:   clientAuth,
			}, nil
		},
	}, nil
}

// parseTLS parses the certificate, the key and, when given, the client CA.
func parseTLS(contents [][]byte) (*tlsState, error) {
	cert, err := tls.X509KeyPair(contents[0], contents[1])
	if err != nil {
		return nil, fmt.Errorf("server: TLS certificate: %w", err)
	}
	s := &tlsState{cert: cert}
	if len(contents) > 2 {
		s.clientCAs = x509.NewCertPool()
		if !s.clientCAs.AppendCertsFromPEM(contents[2]) {
			return nil, errors.New("server: TLS client CA: no PEM certificate")
		}
	}
	return s, nil
}
