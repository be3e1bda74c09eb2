// Package pki issues the throwaway certificates that end-to-end tests need: a
// certificate authority, serving certificates for loopback servers and client
// certificates that carry a Kubernetes user name and groups.
//
// Keys are ECDSA P-256, which is fast to generate and accepted by every
// Kubernetes and etcd component. Nothing here is fit for production use: the
// certificates live for a day and are meant to be thrown away with the test.
package pki

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
	"os"
	"path/filepath"
	"time"
)

// validity is how long issued certificates stay valid; a test never runs this long.
const validity = 24 * time.Hour

// CA is a certificate authority that signs serving and client certificates.
type CA struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	certPEM []byte
}

// NewCA creates a self-signed certificate authority named commonName.
func NewCA(commonName string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("pki: generate CA key: %w", err)
	}
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: commonName},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("pki: create CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("pki: parse CA certificate: %w", err)
	}
	return &CA{cert: cert, key: key, certPEM: encodeCert(der)}, nil
}

// CertPEM returns the PEM encoding of the CA certificate, the trust bundle for
// everything the CA signs.
func (ca *CA) CertPEM() []byte { return append([]byte(nil), ca.certPEM...) }

// Pool returns a certificate pool that trusts only this CA.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
}

// Cert is an issued certificate and its private key, both PEM encoded.
type Cert struct {
	// CertPEM is the PEM-encoded certificate.
	CertPEM []byte
	// KeyPEM is the PEM-encoded private key (SEC 1 "EC PRIVATE KEY").
	KeyPEM []byte
}

// TLSCertificate returns c in the form crypto/tls serves or presents.
func (c Cert) TLSCertificate() (tls.Certificate, error) {
	return tls.X509KeyPair(c.CertPEM, c.KeyPEM)
}

// WriteFiles writes the certificate to dir/name.crt and the key to
// dir/name.key and returns the two paths.
func (c Cert) WriteFiles(dir, name string) (certFile, keyFile string, err error) {
	certFile = filepath.Join(dir, name+".crt")
	keyFile = filepath.Join(dir, name+".key")
	if err := os.WriteFile(certFile, c.CertPEM, 0o600); err != nil {
		return "", "", fmt.Errorf("pki: %w", err)
	}
	if err := os.WriteFile(keyFile, c.KeyPEM, 0o600); err != nil {
		return "", "", fmt.Errorf("pki: %w", err)
	}
	return certFile, keyFile, nil
}

// ServingCert issues a TLS server certificate valid for the given host names
// and IP addresses.
func (ca *CA) ServingCert(commonName string, dnsNames []string, ips []net.IP) (Cert, error) {
	return ca.issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: commonName},
		DNSNames:    dnsNames,
		IPAddresses: ips,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
}

// ClientCert issues a TLS client certificate. Kubernetes reads the common
// name as the user name and the organizations as the groups.
func (ca *CA) ClientCert(user string, groups ...string) (Cert, error) {
	return ca.issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: user, Organization: groups},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
}

func (ca *CA) issue(tmpl *x509.Certificate) (Cert, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Cert{}, fmt.Errorf("pki: generate key: %w", err)
	}
	serial, err := newSerial()
	if err != nil {
		return Cert{}, err
	}
	tmpl.SerialNumber = serial
	tmpl.NotBefore = ca.cert.NotBefore
	tmpl.NotAfter = ca.cert.NotAfter
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment
	tmpl.BasicConstraintsValid = true
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, key.Public(), ca.key)
	if err != nil {
		return Cert{}, fmt.Errorf("pki: create certificate %q: %w", tmpl.Subject.CommonName, err)
	}
	keyPEM, err := EncodeKey(key)
	if err != nil {
		return Cert{}, err
	}
	return Cert{CertPEM: encodeCert(der), KeyPEM: keyPEM}, nil
}

// NewSigningKey generates a key for signing service-account tokens and
// returns it PEM encoded, private and public halves separately.
func NewSigningKey() (privatePEM, publicPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("pki: generate signing key: %w", err)
	}
	privatePEM, err = EncodeKey(key)
	if err != nil {
		return nil, nil, err
	}
	pub, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		return nil, nil, fmt.Errorf("pki: marshal public key: %w", err)
	}
	return privatePEM, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), nil
}

// EncodeKey returns the PEM (SEC 1) encoding of an ECDSA private key.
func EncodeKey(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("pki: marshal key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}

func encodeCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func newSerial() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126))
	if err != nil {
		return nil, fmt.Errorf("pki: serial number: %w", err)
	}
	return n.Add(n, big.NewInt(1)), nil
}
