package main

import (
	"os"
	"strings"
	"testing"

	"github.com/setpointhq/setpoint/server"
	"sigs.k8s.io/yaml"
)

// manifests returns the objects of a multi-document YAML file.
func manifests(t *testing.T, path string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, doc := range strings.Split(string(b), "\n---\n") {
		var obj map[string]any
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if len(obj) > 0 {
			out = append(out, obj)
		}
	}
	return out
}

// serverArgs returns the server container's arguments in the Deployment
// of the manifest at path.
func serverArgs(t *testing.T, path string) []string {
	t.Helper()
	var args []string
	for _, obj := range manifests(t, path) {
		if obj["kind"] != "Deployment" {
			continue
		}
		spec := obj["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
		for _, a := range spec["containers"].([]any)[0].(map[string]any)["args"].([]any) {
			args = append(args, a.(string))
		}
	}
	return args
}

// The HA overlay's server arguments (deploy-ha) select etcd, over mutual
// TLS, and pass Validate.
func TestDeployHAServerArgs(t *testing.T) {
	c := defaults(t, serverArgs(t, "../../deploy-ha/server-patch.yaml")...)
	if err := c.Validate(); err != nil {
		t.Errorf("deploy-ha arguments: %v", err)
	}
	if c.Store.Kind != "etcd" || c.Store.Cert == "" || c.Store.CA == "" || c.TLSClientCA == "" || c.AuthConfig == "" || !c.MetricsTLS {
		t.Errorf("deploy-ha must run on etcd with client certificates and serve mutual TLS, on the HTTP address too: %+v", c)
	}
	if objs := manifests(t, "../../deploy-ha/pdb.yaml"); len(objs) != 1 || objs[0]["kind"] != "PodDisruptionBudget" {
		t.Errorf("deploy-ha/pdb.yaml: %v", objs)
	}
}

// The server's arguments in deploy/server.yaml are flags this binary has
// and pass Validate: the manifest cannot drift from the binary. Its HTTP
// address, reachable from other pods, serves TLS: the console's tokens
// cross the network.
func TestDeployServerArgs(t *testing.T) {
	args := serverArgs(t, "../../deploy/server.yaml")
	if len(args) == 0 {
		t.Fatal("no server arguments in deploy/server.yaml")
	}
	c := defaults(t, args...)
	if err := c.Validate(); err != nil {
		t.Errorf("deploy/server.yaml arguments: %v", err)
	}
	if c.InsecureDev || c.TLSClientCA == "" || c.AuthConfig == "" || !c.MetricsTLS {
		t.Errorf("deploy/server.yaml must serve mutual TLS with a principals file, and TLS on the HTTP address: %+v", c)
	}
}

// The principals files shipped in deploy/ and testdata/ (the one
// docs/security.md shows) parse.
func TestShippedPrincipalsFiles(t *testing.T) {
	var found int
	for _, obj := range manifests(t, "../../deploy/auth.yaml") {
		if obj["kind"] == "ConfigMap" && obj["metadata"].(map[string]any)["name"] == "setpoint-principals" {
			found++
			if _, err := server.ParseAuthConfig([]byte(obj["data"].(map[string]any)["principals.yaml"].(string))); err != nil {
				t.Errorf("deploy/auth.yaml: %v", err)
			}
		}
	}
	if found != 1 {
		t.Errorf("deploy/auth.yaml has %d setpoint-principals ConfigMaps, want 1", found)
	}
	b, err := os.ReadFile("../../testdata/examples/principals.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := server.ParseAuthConfig(b); err != nil {
		t.Errorf("testdata/examples/principals.yaml: %v", err)
	}
}
