package fleet

import (
	"context"
	"crypto/rand"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"sigs.k8s.io/yaml"

	setpointclient "github.com/setpointhq/setpoint/clients/go"
	"github.com/setpointhq/setpoint/internal/certs"
	"github.com/setpointhq/setpoint/internal/etcdtest"
)

// trustDomain is the SPIFFE trust domain of the test's identities, the
// one `setpointctl certs` uses by default.
const trustDomain = "setpoint.local"

// service is the HA Setpoint service: servers on a three-member etcd, with
// the CA, certificates and principals file `setpointctl certs` issues for
// the clusters.
type service struct {
	etcd    *etcdtest.Cluster
	pki     string // directory of certs.Write's files
	servers []*serverProc
}

// serverProc is one setpoint-server process; kill and start it again
// with the same flags.
type serverProc struct {
	addr string
	args []string
	log  string

	mu   sync.Mutex
	proc *exec.Cmd // nil while killed
}

// startService issues the certificates for clusters, starts the etcd
// cluster and n servers on it, and waits until every server says SERVING.
// At cleanup the servers get SIGTERM and etcd is killed.
func startService(t *testing.T, n int, clusters []string) *service {
	t.Helper()
	s := &service{pki: filepath.Join(t.TempDir(), "pki")}
	o := certs.Defaults()
	o.Clusters, o.Validity = clusters, 24*time.Hour
	files, err := certs.Issue(o, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := certs.Write(s.pki, files, false); err != nil {
		t.Fatal(err)
	}
	resumeKey := filepath.Join(s.pki, "resume.key")
	if err := os.WriteFile(resumeKey, []byte(rand.Text()), 0o600); err != nil {
		t.Fatal(err)
	}
	s.etcd = etcdtest.Start(t, 3)
	dir := t.TempDir()
	manifest := manifestArgs(t, "deploy-ha/server-patch.yaml", "server")
	for i := range n {
		addr := freeAddr(t)
		args := rewrite(t, manifest, map[string]string{
			"-listen":          addr,
			"-data-dir":        filepath.Join(dir, fmt.Sprintf("s%d", i)),
			"-metrics-listen":  "",
			"-tls-cert":        filepath.Join(s.pki, "server.crt"),
			"-tls-key":         filepath.Join(s.pki, "server.key"),
			"-tls-client-ca":   filepath.Join(s.pki, "ca.crt"),
			"-auth-config":     filepath.Join(s.pki, "principals.yaml"),
			"-etcd-endpoints":  strings.Join(s.etcd.Endpoints, ","),
			"-resume-key-file": resumeKey,
		},
			// The test's etcd speaks plain HTTP on loopback, and the
			// metrics listener is off.
			"-etcd-cert", "-etcd-key", "-etcd-ca", "-metrics-tls")
		sp := &serverProc{addr: addr, args: append(args, "-shutdown-timeout=1s"), log: filepath.Join(dir, fmt.Sprintf("s%d.log", i))}
		s.servers = append(s.servers, sp)
	}
	var wg sync.WaitGroup
	for _, sp := range s.servers {
		wg.Go(func() { sp.start(t, s.health(t, sp)) })
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, sp := range s.servers {
			sp.stop(t)
			if t.Failed() {
				t.Logf("%s (last lines):\n%s", sp.log, tail(sp.log, 15))
			}
		}
	})
	return s
}

// addrs is every server's address, comma-separated: what an agent and a
// client dial.
func (s *service) addrs() string {
	var a []string
	for _, sp := range s.servers {
		a = append(a, sp.addr)
	}
	return strings.Join(a, ",")
}

// client returns a client of every server that authenticates with the
// certificate certs.Issue wrote as name ("admin", "platform",
// "agent-a"); it is closed at cleanup.
func (s *service) client(t *testing.T, name string, addr ...string) *setpointclient.Client {
	t.Helper()
	target := s.addrs()
	if len(addr) > 0 {
		target = strings.Join(addr, ",")
	}
	tlsCfg, err := setpointclient.TLSFiles{
		CA: filepath.Join(s.pki, "ca.crt"), Cert: filepath.Join(s.pki, name+".crt"), Key: filepath.Join(s.pki, name+".key"),
		ServerName: "localhost",
	}.Config()
	if err != nil {
		t.Fatal(err)
	}
	c, err := setpointclient.Dial(target, setpointclient.Options{TLS: tlsCfg,
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{MinConnectTimeout: time.Second})}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// health returns a health client of server sp alone, as the admin.
func (s *service) health(t *testing.T, sp *serverProc) healthpb.HealthClient {
	return s.client(t, "admin", sp.addr).Health
}

// start starts the server and waits until probe (its health, dialed
// alone) says SERVING.
func (sp *serverProc) start(t *testing.T, probe healthpb.HealthClient) {
	t.Helper()
	logFile, err := os.OpenFile(sp.log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		t.Error(err)
		return
	}
	defer logFile.Close()
	cmd := exec.Command(bins.server, sp.args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = procAttr()
	if err := cmd.Start(); err != nil {
		t.Error(err)
		return
	}
	sp.mu.Lock()
	sp.proc = cmd
	sp.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		cctx, ccancel := context.WithTimeout(ctx, time.Second)
		resp, err := probe.Check(cctx, &healthpb.HealthCheckRequest{})
		ccancel()
		if err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			return
		}
		if ctx.Err() != nil {
			t.Errorf("server %s not SERVING within 30s: %v\n%s", sp.addr, err, tail(sp.log, 20))
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// kill sends SIGKILL to the server and waits for it to exit.
func (sp *serverProc) kill() {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.proc != nil {
		_ = sp.proc.Process.Kill()
		_ = sp.proc.Wait()
		sp.proc = nil
	}
}

// stop sends SIGTERM and waits; a server that does not stop is an error.
func (sp *serverProc) stop(t *testing.T) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.proc == nil {
		return
	}
	_ = sp.proc.Process.Signal(syscall.SIGTERM)
	if err := sp.proc.Wait(); err != nil {
		t.Errorf("%s after SIGTERM: %v", sp.addr, err)
	}
	sp.proc = nil
}

// manifestArgs returns the args of the container named container in the
// manifest at path (relative to the repository root).
func manifestArgs(t *testing.T, path, container string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", path))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
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
		if c.Name == container {
			return c.Args
		}
	}
	t.Fatalf("%s: no container %q", path, container)
	return nil
}

// rewrite returns the manifest's flags with the values in set replaced
// (what differs on loopback: addresses, files, names) and the flags in
// drop left out; every other flag is kept as deployed. A flag of set or
// drop that the manifest lacks fails the test: the manifest changed, and
// the test must say how to run the new one.
func rewrite(t *testing.T, args []string, set map[string]string, drop ...string) []string {
	t.Helper()
	seen := map[string]bool{}
	var out []string
	for _, a := range args {
		name, _, _ := strings.Cut(a, "=")
		seen[name] = true
		switch v, ok := set[name]; {
		case ok:
			out = append(out, name+"="+v)
		case contains(drop, name):
		default:
			out = append(out, a)
		}
	}
	for name := range set {
		if !seen[name] {
			t.Fatalf("the manifest has no flag %s (it has %v)", name, args)
		}
	}
	for _, name := range drop {
		if !seen[name] {
			t.Fatalf("the manifest has no flag %s (it has %v)", name, args)
		}
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// freeAddr returns a loopback address that was free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// tail returns the last n lines of the file at path.
func tail(path string, n int) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
