package main

import (
	"os"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/setpointhq/setpoint/clients/go/endpoints"
)

// agentArgs returns the agent container's arguments in the Deployment of
// the manifest at path.
func agentArgs(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Kind string
		Spec struct {
			Template struct {
				Spec struct {
					Containers []struct {
						Name string
						Args []string
					}
				}
			}
		}
	}
	if err := yaml.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name == "agent" {
			return c.Args
		}
	}
	t.Fatalf("%s: no agent container", path)
	return nil
}

// The agent's arguments in deploy/ and in the HA overlay pass Validate; the
// overlay reaches every server replica through the headless Service and
// otherwise keeps deploy/'s arguments.
func TestDeployAgentArgs(t *testing.T) {
	base := agentArgs(t, "../../deploy/agent.yaml")
	ha := agentArgs(t, "../../deploy-ha/agent-patch.yaml")
	for name, args := range map[string][]string{"deploy": base, "deploy-ha": ha} {
		c := parse(t, args...)
		if err := c.Validate(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if _, _, err := endpoints.Target(c.ServiceAddress); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	c := parse(t, ha...)
	if !strings.HasPrefix(c.ServiceAddress, "dns:///setpoint-server-headless.") || c.ServerName != "setpoint-server.setpoint-system.svc" {
		t.Errorf("deploy-ha agent dials %s verifying %q; want the headless Service, verifying the name the server certificate has", c.ServiceAddress, c.ServerName)
	}
	other := func(args []string) []string {
		return slices.DeleteFunc(slices.Clone(args), func(a string) bool {
			return strings.HasPrefix(a, "-service-address=") || strings.HasPrefix(a, "-tls-server-name=")
		})
	}
	if !slices.Equal(other(base), other(ha)) {
		t.Errorf("deploy-ha's agent arguments drifted from deploy/'s:\n%q\n%q", other(base), other(ha))
	}
}
