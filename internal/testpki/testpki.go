// Package testpki issues the throwaway certificates Setpoint's tests and
// test tools need: certificate authorities; server certificates (for
// localhost and 127.0.0.1 unless told otherwise); client certificates
// carrying a SPIFFE-style URI SAN, a Kubernetes user name and groups, or
// only a common name; valid, expired or signed by another CA; and the
// service-account signing key a kube-apiserver needs.
//
// NewCA and CA.Sign return errors, for code without a testing.TB (the
// kube-apiserver harness, the TypeScript client's test server); TestCA and
// CA.Issue fail the test instead.
//
// Keys are ECDSA P-256, fast to generate and accepted by every Kubernetes
// and etcd component. Nothing here is fit for production: certificates
// live for a day and are meant to be thrown away with the test.
package testpki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// validity is how long a CA, and by default its certificates, stay valid;
// a test never runs this long.
const validity = 24 * time.Hour

// CA is a certificate authority.
type CA struct {
	// Cert is the CA's certificate.
	Cert *x509.Certificate
	// PEM is Cert, PEM-encoded.
	PEM []byte
	key *ecdsa.PrivateKey
}

// NewCA returns a new self-signed CA named name, valid for a day.
func NewCA(name string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("testpki: generate CA key: %w", err)
	}
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: name},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(validity),
		IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("testpki: create CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("testpki: parse CA certificate: %w", err)
	}
	return &CA{Cert: cert, PEM: encodeCert(der), key: key}, nil
}

// TestCA is NewCA for a test: an error fails it.
func TestCA(t testing.TB, name string) *CA {
	t.Helper()
	ca, err := NewCA(name)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// Pool returns a pool holding only the CA.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// Leaf describes a certificate to issue.
type Leaf struct {
	// CommonName is the subject's common name (Kubernetes reads it as the
	// user name of a client certificate).
	CommonName string
	// Groups are the subject's organizations (Kubernetes reads them as the
	// user's groups).
	Groups []string
	// URI is a URI SAN (e.g. "spiffe://setpoint.test/cluster/a"); none when
	// empty.
	URI string
	// Server makes a server certificate, for DNSNames and IPs; otherwise a
	// client certificate.
	Server bool
	// DNSNames and IPs are the names a server certificate is valid for;
	// "localhost" and 127.0.0.1 when both are empty.
	DNSNames []string
	IPs      []net.IP
	// NotAfter ends the validity; the CA's end when zero.
	NotAfter time.Time
}

// Pair is an issued certificate and its key.
type Pair struct {
	// Cert is the certificate and key for a tls.Config.
	Cert tls.Certificate
	// Leaf is the parsed certificate.
	Leaf *x509.Certificate
	// CertPEM and KeyPEM are the PEM encodings (the key in PKCS #8).
	CertPEM, KeyPEM []byte
}

// Sign issues the certificate l describes.
func (ca *CA) Sign(l Leaf) (Pair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Pair{}, fmt.Errorf("testpki: generate key: %w", err)
	}
	serial, err := newSerial()
	if err != nil {
		return Pair{}, err
	}
	if l.NotAfter.IsZero() {
		l.NotAfter = ca.Cert.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: l.CommonName, Organization: l.Groups},
		NotBefore: ca.Cert.NotBefore, NotAfter: l.NotAfter, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if l.Server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.DNSNames, tmpl.IPAddresses = l.DNSNames, l.IPs
		if len(l.DNSNames) == 0 && len(l.IPs) == 0 {
			tmpl.DNSNames, tmpl.IPAddresses = []string{"localhost"}, []net.IP{net.IPv4(127, 0, 0, 1)}
		}
	}
	if l.URI != "" {
		u, err := url.Parse(l.URI)
		if err != nil {
			return Pair{}, fmt.Errorf("testpki: URI SAN: %w", err)
		}
		tmpl.URIs = []*url.URL{u}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		return Pair{}, fmt.Errorf("testpki: create certificate %q: %w", l.CommonName, err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return Pair{}, fmt.Errorf("testpki: parse certificate: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return Pair{}, fmt.Errorf("testpki: marshal key: %w", err)
	}
	return Pair{
		Cert:    tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf},
		Leaf:    leaf,
		CertPEM: encodeCert(der),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

// Issue is Sign for a test: an error fails it.
func (ca *CA) Issue(t testing.TB, l Leaf) Pair {
	t.Helper()
	p, err := ca.Sign(l)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// WriteFiles writes the certificate to dir/name.crt and the key to
// dir/name.key and returns the two paths.
func (p Pair) WriteFiles(dir, name string) (certFile, keyFile string, err error) {
	certFile, keyFile = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	if err := os.WriteFile(certFile, p.CertPEM, 0o600); err != nil {
		return "", "", fmt.Errorf("testpki: %w", err)
	}
	if err := os.WriteFile(keyFile, p.KeyPEM, 0o600); err != nil {
		return "", "", fmt.Errorf("testpki: %w", err)
	}
	return certFile, keyFile, nil
}

// Files are PEM files written by Write.
type Files struct {
	// Cert, Key and CA are the paths of the certificate, its key and the
	// CA's certificate.
	Cert, Key, CA string
}

// Write writes p, its key and ca's certificate as cert.pem, key.pem and
// ca.pem in dir (created when missing), replacing them atomically (write
// and rename, as a Kubernetes Secret volume does) so a reader never sees
// half a file.
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

// NewSigningKey generates a key for signing service-account tokens and
// returns it PEM encoded, private (SEC 1) and public halves separately.
func NewSigningKey() (privatePEM, publicPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("testpki: generate signing key: %w", err)
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("testpki: marshal key: %w", err)
	}
	pub, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		return nil, nil, fmt.Errorf("testpki: marshal public key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), nil
}

func encodeCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// newSerial returns a random serial number, unique across processes (a
// kube-apiserver and its clients see certificates of several).
func newSerial() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126))
	if err != nil {
		return nil, fmt.Errorf("testpki: serial number: %w", err)
	}
	return n.Add(n, big.NewInt(1)), nil
}
