package certs_test

import (
	"crypto/x509"
	"encoding/pem"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/setpointhq/setpoint/internal/certs"
	"github.com/setpointhq/setpoint/server"
	"sigs.k8s.io/yaml"
)

func TestValidate(t *testing.T) {
	with := func(f func(*certs.Options)) certs.Options { o := certs.Defaults(); f(&o); return o }
	tests := []struct {
		name string
		o    certs.Options
		want string // "" for valid
	}{
		{"defaults", certs.Defaults(), ""},
		{"no cluster", with(func(o *certs.Options) { o.Clusters = nil }), "--cluster"},
		{"cluster with a slash", with(func(o *certs.Options) { o.Clusters = []string{"eu/1"} }), `--cluster "eu/1"`},
		{"trust domain with a scheme", with(func(o *certs.Options) { o.TrustDomain = "spiffe://x" }), "--trust-domain"},
		{"a minute", with(func(o *certs.Options) { o.Validity = time.Minute }), "--validity"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.o.Validate()
			if (err == nil) != (tt.want == "") || (err != nil && !strings.Contains(err.Error(), tt.want)) {
				t.Errorf("Validate() = %v, want %q", err, tt.want)
			}
		})
	}
}

// Issue's files: the server certificate holds the names deploy/ dials, each
// agent its cluster's SPIFFE ID, and the principals file parses as the
// server reads it.
func TestIssue(t *testing.T) {
	o := certs.Defaults()
	o.Clusters = []string{"eu1", "us1"}
	o.ServerNames = []string{"setpoint.example.com", "10.0.0.7"}
	files, err := certs.Issue(o, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string][]byte{}
	for _, f := range files {
		byName[f.Name] = f.Data
		if strings.HasSuffix(f.Name, ".key") != f.Secret {
			t.Errorf("%s: secret %v", f.Name, f.Secret)
		}
	}
	parse := func(name string) *x509.Certificate {
		t.Helper()
		b, _ := pem.Decode(byName[name])
		if b == nil {
			t.Fatalf("%s: no PEM", name)
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	roots := x509.NewCertPool()
	roots.AddCert(parse("ca.crt"))
	for _, name := range []string{"setpoint-server.setpoint-system.svc", "localhost", "127.0.0.1", "setpoint.example.com", "10.0.0.7"} {
		if _, err := parse("server.crt").Verify(x509.VerifyOptions{DNSName: name, Roots: roots}); err != nil {
			t.Errorf("server certificate for %s: %v", name, err)
		}
	}
	for _, c := range o.Clusters {
		cert := parse("agent-" + c + ".crt")
		if len(cert.URIs) != 1 || cert.URIs[0].String() != "spiffe://setpoint.local/cluster/"+c {
			t.Errorf("agent-%s URIs %v", c, cert.URIs)
		}
		if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
			t.Errorf("agent-%s: %v", c, err)
		}
	}
	if _, err := server.ParseAuthConfig(byName["principals.yaml"]); err != nil {
		t.Errorf("principals.yaml: %v\n%s", err, byName["principals.yaml"])
	}
}

// deploy/auth.yaml lists exactly the identities Issue gives with the
// defaults, so deploy/ works with Secrets made from those files.
func TestDeployListsTheDefaultIdentities(t *testing.T) {
	files, err := certs.Issue(certs.Defaults(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var issued map[string]any
	for _, f := range files {
		if f.Name == "principals.yaml" {
			if err := yaml.Unmarshal(f.Data, &issued); err != nil {
				t.Fatal(err)
			}
		}
	}
	b, err := os.ReadFile("../../deploy/auth.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cm struct {
		Data map[string]string `json:"data"`
	}
	if err := yaml.Unmarshal(b, &cm); err != nil {
		t.Fatal(err)
	}
	var deployed map[string]any
	if err := yaml.Unmarshal([]byte(cm.Data["principals.yaml"]), &deployed); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(issued, deployed); diff != "" {
		t.Errorf("deploy/auth.yaml's principals differ from setpointctl certs' (-issued +deployed):\n%s", diff)
	}
}
