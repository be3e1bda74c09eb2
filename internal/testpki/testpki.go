// Package testpki issues the throwaway certificates Setpoint's TLS tests
// need: certificate authorities, server certificates for loopback, and
// client certificates carrying a SPIFFE-style URI SAN or only a subject
// common name, valid, expired or signed by another CA.
//
// Keys are ECDSA P-256 (fast to generate). Nothing here is fit for
// production: use it in tests only.
package testpki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// serial numbers certificates uniquely within a test binary.
var serial atomic.Int64

// CA is a certificate authority.
type CA struct {
	// Cert is the CA's certificate.
	Cert *x509.Certificate
	// PEM is Cert, PEM-encoded.
	PEM []byte
	key *ecdsa.PrivateKey
}

// NewCA returns a new self-signed CA named name, valid for a day.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	key := newKey(t)
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial.Add(1)), Subject: pkix.Name{CommonName: name},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &CA{Cert: cert, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), key: key}
}

// Pool returns a pool holding only the CA.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// Leaf describes a certificate to issue.
type Leaf struct {
	// CommonName is the subject's common name.
	CommonName string
	// URI is a URI SAN (e.g. "spiffe://setpoint.test/cluster/a"); none when
	// empty.
	URI string
	// Server makes a server certificate for localhost and 127.0.0.1;
	// otherwise a client certificate.
	Server bool
	// NotAfter ends the validity; an hour from now when zero.
	NotAfter time.Time
}

// Pair is an issued certificate and its key.
type Pair struct {
	// Cert is the certificate and key for a tls.Config.
	Cert tls.Certificate
	// Leaf is the parsed certificate.
	Leaf *x509.Certificate
	// CertPEM and KeyPEM are the PEM encodings.
	CertPEM, KeyPEM []byte
}

// Issue signs a certificate described by l.
func (ca *CA) Issue(t testing.TB, l Leaf) Pair {
	t.Helper()
	key := newKey(t)
	now := time.Now()
	if l.NotAfter.IsZero() {
		l.NotAfter = now.Add(time.Hour)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial.Add(1)), Subject: pkix.Name{CommonName: l.CommonName},
		NotBefore: now.Add(-2 * time.Hour), NotAfter: l.NotAfter,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if l.Server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.DNSNames = []string{"localhost"}
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
	}
	if l.URI != "" {
		u, err := url.Parse(l.URI)
		if err != nil {
			t.Fatal(err)
		}
		tmpl.URIs = []*url.URL{u}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return Pair{
		Cert:    tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf},
		Leaf:    leaf,
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
	}
}

// Files are PEM files written by Write.
type Files struct {
	// Cert, Key and CA are the paths of the certificate, its key and the
	// CA's certificate.
	Cert, Key, CA string
}

// Write writes p, its key and ca's certificate as cert.pem, key.pem and
// ca.pem in dir (created when missing), replacing them atomically (write and rename, as a
// Kubernetes Secret volume does) so a reader never sees half a file.
func Write(t testing.TB, dir string, ca *CA, p Pair) Files {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	f := Files{Cert: filepath.Join(dir, "cert.pem"), Key: filepath.Join(dir, "key.pem"), CA: filepath.Join(dir, "ca.pem")}
	WriteFile(t, f.Key, p.KeyPEM)
	WriteFile(t, f.Cert, p.CertPEM)
	WriteFile(t, f.CA, ca.PEM)
	return f
}

// WriteFile replaces path with b atomically.
func WriteFile(t testing.TB, path string, b []byte) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}
