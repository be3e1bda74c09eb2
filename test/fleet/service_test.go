package fleet

import (
	"io"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	setpointclient "github.com/setpointhq/setpoint/clients/go"
	"github.com/setpointhq/setpoint/internal/etcdtest"
	"github.com/setpointhq/setpoint/internal/twin"
)

// service is the HA Setpoint service of a test: servers with deploy-ha's
// flags (twin.StartService) on a three-member etcd.
type service struct {
	*twin.Service
	etcd *etcdtest.Cluster
}

// startService starts the etcd cluster and n servers on it, with agent
// certificates for clusters; at cleanup the servers get SIGTERM (an
// unclean exit fails the test) and etcd is killed.
func startService(t *testing.T, n int, clusters []string) *service {
	t.Helper()
	e := etcdtest.Start(t, 3)
	dir := t.TempDir()
	s, err := twin.StartService(t.Context(), twin.ServiceOptions{
		Binary: bins.server, Root: filepath.Join("..", ".."), Dir: dir,
		Servers: n, Etcd: e.Endpoints, Clusters: clusters, Console: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Error(err)
		}
		if t.Failed() {
			for _, srv := range s.Servers {
				t.Logf("%s (last lines):\n%s", srv.Log, twin.Tail(srv.Log, 15))
			}
		}
	})
	return &service{Service: s, etcd: e}
}

// client dials every server (or the addresses given) as name, closed at
// cleanup.
func (s *service) client(t *testing.T, name string) *setpointclient.Client {
	t.Helper()
	c, err := s.Client(s.Addrs(), name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// startAgent runs setpoint-agent for the twin as cluster name (twin.StartAgent)
// with the test's windows; serve replaces -serve when set, extra flags come
// last. It is stopped with SIGTERM at cleanup, an unclean exit failing the
// test.
func startAgent(t *testing.T, svc *service, tw *twin.Twin, name, serve string, w windows, extra ...string) *twin.Agent {
	t.Helper()
	a, err := twin.StartAgent(twin.AgentOptions{
		Binary: bins.agent, Root: filepath.Join("..", ".."), Dir: t.TempDir(),
		Twin: tw, Service: svc.Service, Cluster: name, Serve: serve,
		SyncPeriod: w.sync, DownscaleStabilization: w.downscaleStabilizing, Flags: extra,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := a.Stop(); err != nil {
			t.Errorf("agent %s: %v", name, err)
		}
		if t.Failed() {
			t.Logf("agent %s log (last lines):\n%s", name, twin.Tail(a.Log, 25))
		}
	})
	return a
}

// consoleGet fetches path of the web console's JSON API (server 0's, over
// TLS) with the client certificate certs.Issue wrote as name, and returns
// the status code and body.
func (s *service) consoleGet(t *testing.T, name, path string) (int, []byte) {
	t.Helper()
	cfg, err := setpointclient.TLSFiles{
		CA: filepath.Join(s.PKI, "ca.crt"), Cert: filepath.Join(s.PKI, name+".crt"), Key: filepath.Join(s.PKI, name+".key"),
		ServerName: "localhost",
	}.Config()
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}, Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	resp, err := client.Get(s.ConsoleURL + path)
	if err != nil {
		t.Fatalf("console %s as %s: %v", path, name, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, body
}
