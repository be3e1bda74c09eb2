// Package certs issues what a Setpoint installation authenticates with:
// a CA, the server's certificate for every name clients dial, one agent
// certificate per cluster (URI SAN spiffe://TRUST-DOMAIN/cluster/NAME), a
// platform and an admin certificate, and the principals file
// (setpoint-server -auth-config) giving each its role. setpointctl certs
// writes them; deploy-local installs them. Keys are ECDSA P-256.
package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Options are what Issue issues.
type Options struct {
	// Clusters get one agent certificate each.
	Clusters []string
	// ServerNames are DNS names or IP addresses of the server besides
	// DefaultServerNames.
	ServerNames []string
	// TrustDomain is the SPIFFE trust domain of the identities.
	TrustDomain string
	// Validity is how long the server's and clients' certificates stay
	// valid; the CA's is ten times as long.
	Validity time.Duration
}

// Defaults are the options deploy/ expects: the agent of cluster
// "default", identities in the trust domain setpoint.local, a year.
func Defaults() Options {
	return Options{Clusters: []string{"default"}, TrustDomain: "setpoint.local", Validity: 365 * 24 * time.Hour}
}

// DefaultServerNames are the names every server certificate holds: the
// Service setpoint-server of deploy/ in setpoint-system, and loopback.
var DefaultServerNames = []string{
	"setpoint-server", "setpoint-server.setpoint-system", "setpoint-server.setpoint-system.svc",
	"setpoint-server.setpoint-system.svc.cluster.local", "localhost", "127.0.0.1",
}

// Validate checks the options' values; its errors name the flag of
// setpointctl certs that sets each.
func (o Options) Validate() error {
	if len(o.Clusters) == 0 {
		return errors.New("--cluster: name at least one cluster, e.g. --cluster default")
	}
	for _, c := range o.Clusters {
		if c == "" || strings.ContainsAny(c, "/ ") {
			return fmt.Errorf("--cluster %q: a cluster name is one path segment without spaces, e.g. eu1", c)
		}
	}
	if o.TrustDomain == "" || strings.ContainsAny(o.TrustDomain, "/: ") {
		return fmt.Errorf("--trust-domain %q: want a host name, e.g. setpoint.example", o.TrustDomain)
	}
	if o.Validity < time.Hour {
		return fmt.Errorf("--validity %s: want at least 1h", o.Validity)
	}
	return nil
}

// File is one file of an installation.
type File struct {
	// Name is the file's name (ca.crt, server.key, principals.yaml, ...).
	Name string
	// Data is its content.
	Data []byte
	// Secret is true for private keys: Write makes them readable by their
	// owner only.
	Secret bool
}

// Issue makes every file of an installation, valid from now: the CA,
// the server's certificate, one agent certificate per cluster, a platform
// and an admin certificate, and the principals file listing them.
func Issue(o Options, now time.Time) ([]File, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	ca, err := newIssuer(now, 10*o.Validity)
	if err != nil {
		return nil, err
	}
	files := []File{{"ca.crt", ca.certPEM, false}, {"ca.key", ca.keyPEM, true}}
	add := func(name string, tmpl *x509.Certificate) error {
		cert, key, err := ca.sign(tmpl, now, o.Validity)
		if err != nil {
			return fmt.Errorf("certs: %s: %w", name, err)
		}
		files = append(files, File{name + ".crt", cert, false}, File{name + ".key", key, true})
		return nil
	}
	server := &x509.Certificate{Subject: pkix.Name{CommonName: "setpoint-server"}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	for _, n := range append(append([]string(nil), DefaultServerNames...), o.ServerNames...) {
		if ip := net.ParseIP(n); ip != nil {
			server.IPAddresses = append(server.IPAddresses, ip)
		} else {
			server.DNSNames = append(server.DNSNames, n)
		}
	}
	if err := add("server", server); err != nil {
		return nil, err
	}
	var principals strings.Builder
	principals.WriteString("# Who may call the Setpoint server (setpoint-server -auth-config); written by\n# setpointctl certs. Identities are the certificates' SPIFFE IDs (docs/security.md).\nprincipals:\n")
	client := func(name, role, id string, allClusters bool) error {
		u, err := url.Parse(id)
		if err != nil {
			return err
		}
		if err := add(name, &x509.Certificate{Subject: pkix.Name{CommonName: name}, URIs: []*url.URL{u}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
			return err
		}
		fmt.Fprintf(&principals, "  - name: %s\n    role: %q\n", name, role)
		if allClusters {
			principals.WriteString("    clusters: [\"*\"]\n")
		}
		fmt.Fprintf(&principals, "    certificates: [%q]\n", id)
		return nil
	}
	for _, c := range o.Clusters {
		if err := client("agent-"+c, "cluster:"+c, fmt.Sprintf("spiffe://%s/cluster/%s", o.TrustDomain, c), false); err != nil {
			return nil, err
		}
	}
	if err := client("platform", "platform", fmt.Sprintf("spiffe://%s/platform/platform", o.TrustDomain), true); err != nil {
		return nil, err
	}
	if err := client("admin", "admin", fmt.Sprintf("spiffe://%s/admin/admin", o.TrustDomain), false); err != nil {
		return nil, err
	}
	files = append(files, File{"principals.yaml", []byte(principals.String()), false})
	return files, nil
}

// Write writes files into dir (created if missing), refusing to replace
// an existing file unless force: a second run must not silently replace a
// CA in use.
func Write(dir string, files []File, force bool) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("certs: %w", err)
	}
	if !force {
		for _, f := range files {
			if _, err := os.Stat(filepath.Join(dir, f.Name)); err == nil {
				return fmt.Errorf("%s already exists: certs will not replace a CA or key in use.\nPass --force to issue everything anew (then restart or reload whatever uses them), or choose another --dir", filepath.Join(dir, f.Name))
			} else if !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("certs: %w", err)
			}
		}
	}
	for _, f := range files {
		mode := os.FileMode(0o644)
		if f.Secret {
			mode = 0o600
		}
		if err := os.WriteFile(filepath.Join(dir, f.Name), f.Data, mode); err != nil {
			return fmt.Errorf("certs: %w", err)
		}
	}
	return nil
}

// Names are the files' names.
func Names(files []File) []string {
	out := make([]string, len(files))
	for i, f := range files {
		out[i] = f.Name
	}
	return out
}

// issuer is a CA that signs the installation's certificates.
type issuer struct {
	cert            *x509.Certificate
	key             *ecdsa.PrivateKey
	certPEM, keyPEM []byte
}

// newIssuer creates a self-signed CA valid from now for validity.
func newIssuer(now time.Time, validity time.Duration) (*issuer, error) {
	key, keyPEM, err := newKey()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: "setpoint CA"},
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := create(tmpl, tmpl, key, key, now, validity)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &issuer{cert: cert, key: key, certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), keyPEM: keyPEM}, nil
}

// sign issues a certificate from tmpl with a new key, valid from now for
// validity; it returns the certificate and the key in PEM.
func (ca *issuer) sign(tmpl *x509.Certificate, now time.Time, validity time.Duration) (certPEM, keyPEM []byte, err error) {
	key, keyPEM, err := newKey()
	if err != nil {
		return nil, nil, err
	}
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.BasicConstraintsValid = true
	der, err := create(tmpl, ca.cert, key, ca.key, now, validity)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), keyPEM, nil
}

// create signs tmpl (given a random serial and its validity) with
// signer's key.
func create(tmpl, parent *x509.Certificate, key, signer *ecdsa.PrivateKey, now time.Time, validity time.Duration) ([]byte, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, err
	}
	tmpl.SerialNumber = serial.Add(serial, big.NewInt(1))
	tmpl.NotBefore = now.Add(-5 * time.Minute) // clocks drift
	tmpl.NotAfter = now.Add(validity)
	return x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), signer)
}

// newKey generates an ECDSA P-256 key, returned with its PKCS #8 PEM.
func newKey() (*ecdsa.PrivateKey, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return key, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}
