package main

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

	"github.com/spf13/cobra"
)

// certsOptions are what certs issues.
type certsOptions struct {
	dir         string
	clusters    []string
	serverNames []string
	trustDomain string
	validity    time.Duration
	force       bool
}

// The names deploy/ expects: the server's Service in setpoint-system.
var defaultServerNames = []string{
	"setpoint-server", "setpoint-server.setpoint-system", "setpoint-server.setpoint-system.svc",
	"setpoint-server.setpoint-system.svc.cluster.local", "localhost", "127.0.0.1",
}

func certsCmd(e *env) *cobra.Command {
	o := certsOptions{}
	cmd := &cobra.Command{
		Use:     "certs [--dir DIR] [--cluster NAME]...",
		GroupID: "setup",
		Short:   "Issue the CA, server, agent and platform certificates and the principals file",
		Long: `Issue everything a Setpoint installation authenticates with, into DIR:

  ca.crt, ca.key            the CA that signs the server's and the clients' certificates
  server.crt, server.key    the server's certificate, for every name clients dial
                            (the Service setpoint-server in setpoint-system, localhost)
  agent-CLUSTER.crt, .key   one agent certificate per --cluster, URI SAN
                            spiffe://TRUST-DOMAIN/cluster/CLUSTER
  platform.crt, .key        a platform reading every cluster (dashboards, planners)
  admin.crt, .key           an operator (setpointctl backup, delete)
  principals.yaml           the server's -auth-config, listing each of them with its role

deploy/local reads these files from deploy/local/pki, so the documented
install is: setpointctl certs --dir deploy/local/pki, then kubectl apply -k
deploy/local. Keep ca.key offline in production, or use your own CA or
cert-manager (docs/security.md): the files' names and identities are the same.`,
		Example: `  # The certificates deploy/local installs
  setpointctl certs --dir deploy/local/pki

  # Two clusters, and the name a load balancer gives the server
  setpointctl certs --dir pki --cluster eu1 --cluster us1 --server-name setpoint.example.com

  # Then, for a server outside Kubernetes
  setpoint-server -tls-cert pki/server.crt -tls-key pki/server.key -tls-client-ca pki/ca.crt -auth-config pki/principals.yaml
  setpointctl --ca pki/ca.crt --cert pki/admin.crt --key pki/admin.key list`,
		Args: noArgs,
	}
	fs := cmd.Flags()
	fs.StringVar(&o.dir, "dir", "pki", "directory to write the files to (created if missing)")
	fs.StringSliceVar(&o.clusters, "cluster", []string{"default"}, "a cluster whose agent gets a certificate (repeat, or comma-separated); deploy/ runs the agent of cluster \"default\"")
	fs.StringSliceVar(&o.serverNames, "server-name", nil, "another DNS name or IP address of the server (repeat); the in-cluster Service names and localhost are always included")
	fs.StringVar(&o.trustDomain, "trust-domain", "setpoint.local", "the SPIFFE trust domain of the identities")
	fs.DurationVar(&o.validity, "validity", 365*24*time.Hour, "how long the server's and clients' certificates stay valid (the CA: ten times as long)")
	fs.BoolVar(&o.force, "force", false, "overwrite existing files")
	cmd.MarkFlagDirname("dir")
	cmd.RunE = localRun(func(cmd *cobra.Command, _ []string) error {
		if err := o.validate(); err != nil {
			return usagef(cmd, "%v", err)
		}
		files, err := o.issue(time.Now())
		if err != nil {
			return err
		}
		if err := writeFiles(o.dir, files, o.force); err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "wrote %s to %s\n", strings.Join(fileNames(files), ", "), o.dir)
		_, err = fmt.Fprintf(e.stdout, "next: kubectl apply -k deploy/local (when DIR is deploy/local/pki), or see docs/security.md\n")
		return err
	})
	return cmd
}

func (o *certsOptions) validate() error {
	if o.dir == "" {
		return errors.New("--dir must name a directory")
	}
	if len(o.clusters) == 0 {
		return errors.New("--cluster: name at least one cluster, e.g. --cluster default")
	}
	for _, c := range o.clusters {
		if c == "" || strings.ContainsAny(c, "/ ") {
			return fmt.Errorf("--cluster %q: a cluster name is one path segment without spaces, e.g. eu1", c)
		}
	}
	if o.trustDomain == "" || strings.ContainsAny(o.trustDomain, "/: ") {
		return fmt.Errorf("--trust-domain %q: want a host name, e.g. setpoint.example", o.trustDomain)
	}
	if o.validity < time.Hour {
		return fmt.Errorf("--validity %s: want at least 1h", o.validity)
	}
	return nil
}

// pemFile is one file certs writes.
type pemFile struct {
	name string
	data []byte
	// secret files are readable by their owner only.
	secret bool
}

// issue makes every file of the installation, at now.
func (o *certsOptions) issue(now time.Time) ([]pemFile, error) {
	ca, err := newIssuer(now, 10*o.validity)
	if err != nil {
		return nil, err
	}
	files := []pemFile{{"ca.crt", ca.certPEM, false}, {"ca.key", ca.keyPEM, true}}
	add := func(name string, tmpl *x509.Certificate) error {
		cert, key, err := ca.sign(tmpl, now, o.validity)
		if err != nil {
			return fmt.Errorf("certs: %s: %w", name, err)
		}
		files = append(files, pemFile{name + ".crt", cert, false}, pemFile{name + ".key", key, true})
		return nil
	}
	server := &x509.Certificate{Subject: pkix.Name{CommonName: "setpoint-server"}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	for _, n := range append(append([]string(nil), defaultServerNames...), o.serverNames...) {
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
	for _, c := range o.clusters {
		if err := client("agent-"+c, "cluster:"+c, fmt.Sprintf("spiffe://%s/cluster/%s", o.trustDomain, c), false); err != nil {
			return nil, err
		}
	}
	if err := client("platform", "platform", fmt.Sprintf("spiffe://%s/platform/platform", o.trustDomain), true); err != nil {
		return nil, err
	}
	if err := client("admin", "admin", fmt.Sprintf("spiffe://%s/admin/admin", o.trustDomain), false); err != nil {
		return nil, err
	}
	files = append(files, pemFile{"principals.yaml", []byte(principals.String()), false})
	return files, nil
}

// writeFiles writes files into dir, refusing to overwrite any unless
// force: a second run must not silently replace a CA in use.
func writeFiles(dir string, files []pemFile, force bool) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("certs: %w", err)
	}
	if !force {
		for _, f := range files {
			if _, err := os.Stat(filepath.Join(dir, f.name)); err == nil {
				return fmt.Errorf("%s already exists: certs will not replace a CA or key in use.\nPass --force to issue everything anew (then restart or reload whatever uses them), or choose another --dir", filepath.Join(dir, f.name))
			} else if !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("certs: %w", err)
			}
		}
	}
	for _, f := range files {
		mode := os.FileMode(0o644)
		if f.secret {
			mode = 0o600
		}
		if err := os.WriteFile(filepath.Join(dir, f.name), f.data, mode); err != nil {
			return fmt.Errorf("certs: %w", err)
		}
	}
	return nil
}

func fileNames(files []pemFile) []string {
	out := make([]string, len(files))
	for i, f := range files {
		out[i] = f.name
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
