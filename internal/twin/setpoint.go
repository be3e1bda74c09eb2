package twin

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"sigs.k8s.io/yaml"

	setpointclient "github.com/setpointhq/setpoint/clients/go"
	"github.com/setpointhq/setpoint/internal/certs"
)

// The Setpoint side of a fleet: setpoint-server and setpoint-agent
// processes started with the flags deploy-ha gives them, the differences
// of a loopback run (addresses, files, names) substituted, everything else
// as deployed.

// Manifests whose flags the processes run with, relative to the
// repository root.
const (
	ServerManifest = "deploy-ha/server-patch.yaml"
	AgentManifest  = "deploy-ha/agent-patch.yaml"
)

// ServiceOptions configures StartService.
type ServiceOptions struct {
	// Binary is the setpoint-server binary.
	Binary string
	// Root is the repository root, where the manifests are.
	Root string
	// Dir holds the certificates, data directories and logs; the caller
	// removes it.
	Dir string
	// Servers is how many servers to run; zero means 3.
	Servers int
	// Etcd are the client URLs of the etcd the servers share.
	Etcd []string
	// Clusters get an agent certificate each (role cluster:<name>).
	Clusters []string
	// Console serves the first server's web console on a loopback port
	// (ConsoleURL), over TLS with the service's certificate; the others
	// serve none.
	Console bool
	// ConsoleToken, when set, is a bearer token of a platform principal
	// that sees every cluster, added to the principals file, to sign in
	// to the console with.
	ConsoleToken string
}

// Service is setpoint-server processes on one etcd, with the CA,
// certificates and principals file `setpointctl certs` issues.
type Service struct {
	// PKI is the directory of the certificates and principals.yaml:
	// ca.crt, server.*, agent-<cluster>.*, platform.*, admin.*.
	PKI string
	// Servers are the processes, in start order.
	Servers []*Server
	// ConsoleURL is the web console's address, when Console was set.
	ConsoleURL string
}

// Server is one setpoint-server process; Kill and Start it again with the
// same flags.
type Server struct {
	// Addr is its gRPC address on loopback.
	Addr string
	// Log is the file its output is appended to.
	Log string

	binary string
	args   []string
	health healthpb.HealthClient
	conn   *setpointclient.Client

	mu   sync.Mutex
	proc *exec.Cmd // nil while not running
}

// StartService issues the certificates, starts the servers and waits
// until each says SERVING.
func StartService(ctx context.Context, o ServiceOptions) (_ *Service, err error) {
	if o.Servers == 0 {
		o.Servers = 3
	}
	s := &Service{PKI: filepath.Join(o.Dir, "pki")}
	defer func() {
		if err != nil {
			s.Stop()
		}
	}()
	co := certs.Defaults()
	co.Clusters, co.Validity = o.Clusters, 24*time.Hour
	files, err := certs.Issue(co, time.Now())
	if err != nil {
		return nil, err
	}
	if o.ConsoleToken != "" {
		for i, f := range files {
			if f.Name == "principals.yaml" {
				sum := sha256.Sum256([]byte(o.ConsoleToken))
				files[i].Data = fmt.Appendf(slices.Clip(f.Data), "  - name: console\n    role: \"platform\"\n    clusters: [\"*\"]\n    token_sha256: [%q]\n", hex.EncodeToString(sum[:]))
			}
		}
	}
	if err := certs.Write(s.PKI, files, false); err != nil {
		return nil, err
	}
	// Every server seals Watch resume points with one secret, as
	// deploy-ha gives them one Secret.
	resumeKey := filepath.Join(s.PKI, "resume.key")
	if err := os.WriteFile(resumeKey, []byte(rand.Text()), 0o600); err != nil {
		return nil, fmt.Errorf("twin: %w", err)
	}
	manifest, err := ManifestArgs(filepath.Join(o.Root, ServerManifest), "server")
	if err != nil {
		return nil, err
	}
	for i := range o.Servers {
		addr, err := FreeAddr()
		if err != nil {
			return nil, err
		}
		metrics := ""
		if o.Console && i == 0 {
			if metrics, err = FreeAddr(); err != nil {
				return nil, err
			}
			s.ConsoleURL = "https://" + metrics + "/console/"
		}
		set := map[string]string{
			"-listen":          addr,
			"-data-dir":        filepath.Join(o.Dir, fmt.Sprintf("server-%d", i)),
			"-metrics-listen":  metrics,
			"-tls-cert":        filepath.Join(s.PKI, "server.crt"),
			"-tls-key":         filepath.Join(s.PKI, "server.key"),
			"-tls-client-ca":   filepath.Join(s.PKI, "ca.crt"),
			"-auth-config":     filepath.Join(s.PKI, "principals.yaml"),
			"-etcd-endpoints":  strings.Join(o.Etcd, ","),
			"-resume-key-file": resumeKey,
		}
		// The test etcd speaks plain HTTP on loopback.
		drop := []string{"-etcd-cert", "-etcd-key", "-etcd-ca"}
		if metrics == "" {
			drop = append(drop, "-metrics-tls")
		}
		args, err := Rewrite(manifest, set, drop...)
		if err != nil {
			return nil, fmt.Errorf("twin: %s: %w", ServerManifest, err)
		}
		srv := &Server{Addr: addr, Log: filepath.Join(o.Dir, fmt.Sprintf("server-%d.log", i)), binary: o.Binary,
			args: append(args, "-shutdown-timeout=1s")}
		if srv.conn, err = s.Client(srv.Addr, "admin"); err != nil {
			return nil, err
		}
		srv.health = srv.conn.Health
		s.Servers = append(s.Servers, srv)
	}
	errs := make([]error, len(s.Servers))
	var wg sync.WaitGroup
	for i, srv := range s.Servers {
		wg.Go(func() { errs[i] = srv.Start(ctx) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return s, nil
}

// Addrs is every server's address, comma-separated: what agents and
// clients dial.
func (s *Service) Addrs() string {
	var a []string
	for _, srv := range s.Servers {
		a = append(a, srv.Addr)
	}
	return strings.Join(a, ",")
}

// Client dials target (Addrs, or one server's address) as the identity
// whose certificate StartService wrote as name: "admin", "platform",
// "agent-<cluster>". The caller closes it.
func (s *Service) Client(target, name string) (*setpointclient.Client, error) {
	cfg, err := setpointclient.TLSFiles{
		CA: filepath.Join(s.PKI, "ca.crt"), Cert: filepath.Join(s.PKI, name+".crt"), Key: filepath.Join(s.PKI, name+".key"),
		ServerName: "localhost",
	}.Config()
	if err != nil {
		return nil, err
	}
	return setpointclient.Dial(target, setpointclient.Options{TLS: cfg,
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{MinConnectTimeout: time.Second})}})
}

// Stop stops every server with SIGTERM and returns the errors of those
// that did not exit cleanly.
func (s *Service) Stop() error {
	var errs []error
	for _, srv := range s.Servers {
		errs = append(errs, srv.Stop())
		if srv.conn != nil {
			srv.conn.Close()
		}
	}
	return errors.Join(errs...)
}

// Start starts the server and waits until its health says SERVING.
func (srv *Server) Start(ctx context.Context) error {
	cmd, err := spawn(srv.binary, srv.args, srv.Log)
	if err != nil {
		return err
	}
	srv.mu.Lock()
	srv.proc = cmd
	srv.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		cctx, ccancel := context.WithTimeout(ctx, time.Second)
		resp, err := srv.health.Check(cctx, &healthpb.HealthCheckRequest{})
		ccancel()
		if err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("twin: setpoint-server %s not SERVING within 30s: %v\n%s", srv.Addr, err, Tail(srv.Log, 20))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Kill sends SIGKILL to the server, as a crash would, and waits for it.
func (srv *Server) Kill() {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if srv.proc != nil {
		_ = srv.proc.Process.Kill()
		_ = srv.proc.Wait()
		srv.proc = nil
	}
}

// Pid returns the running process's id, or 0.
func (srv *Server) Pid() int {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if srv.proc == nil {
		return 0
	}
	return srv.proc.Process.Pid
}

// Stop sends SIGTERM and waits; an unclean exit is an error.
func (srv *Server) Stop() error {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if srv.proc == nil {
		return nil
	}
	_ = srv.proc.Process.Signal(syscall.SIGTERM)
	err := srv.proc.Wait()
	srv.proc = nil
	if err != nil {
		return fmt.Errorf("twin: setpoint-server %s after SIGTERM: %w", srv.Addr, err)
	}
	return nil
}

// AgentOptions configures StartAgent.
type AgentOptions struct {
	// Binary is the setpoint-agent binary; Root the repository root.
	Binary, Root string
	// Dir holds its kubeconfig and log; the caller removes it.
	Dir string
	// Twin is the cluster it serves, Service the service it calls.
	Twin    *Twin
	Service *Service
	// Cluster is its cluster name; it authenticates as cluster:<Cluster>.
	Cluster string
	// Serve, when set, replaces the manifest's -serve (hpas: native HPA
	// mode).
	Serve string
	// SyncPeriod and DownscaleStabilization are its windows; zero keeps
	// the agent's defaults.
	SyncPeriod, DownscaleStabilization time.Duration
	// Flags come last, so they win.
	Flags []string
}

// Agent is a setpoint-agent process. Stop it and Start it again with the
// same flags, as a node restart or a rollout would.
type Agent struct {
	// Log is the file its output is appended to.
	Log string

	binary string
	args   []string

	mu  sync.Mutex
	cmd *exec.Cmd // nil while stopped
}

// StartAgent runs setpoint-agent against the twin with deploy-ha's agent
// flags, its certificate and the service's addresses substituted.
func StartAgent(o AgentOptions) (*Agent, error) {
	kubeconfig := filepath.Join(o.Dir, "agent-"+o.Cluster+".kubeconfig")
	if err := o.Twin.Cluster.WriteKubeconfig(kubeconfig); err != nil {
		return nil, err
	}
	pki := o.Service.PKI
	set := map[string]string{
		"-service-address":          o.Service.Addrs(),
		"-tls-server-name":          "localhost",
		"-tls-ca-file":              filepath.Join(pki, "ca.crt"),
		"-tls-cert-file":            filepath.Join(pki, "agent-"+o.Cluster+".crt"),
		"-tls-key-file":             filepath.Join(pki, "agent-"+o.Cluster+".key"),
		"-cluster-name":             o.Cluster,
		"-leader-election-identity": "agent-" + o.Cluster,
		"-metrics-address":          "",
	}
	if o.Serve != "" {
		set["-serve"] = o.Serve
	}
	manifest, err := ManifestArgs(filepath.Join(o.Root, AgentManifest), "agent")
	if err != nil {
		return nil, err
	}
	args, err := Rewrite(manifest, set)
	if err != nil {
		return nil, fmt.Errorf("twin: %s: %w", AgentManifest, err)
	}
	args = append(args, "-kubeconfig="+kubeconfig, "-leader-election-namespace=kube-system", "-recommend-timeout=3s")
	if o.SyncPeriod > 0 {
		args = append(args, "-sync-period="+o.SyncPeriod.String())
	}
	if o.DownscaleStabilization > 0 {
		args = append(args, "-downscale-stabilization-window="+o.DownscaleStabilization.String())
	}
	args = append(args, o.Flags...)
	a := &Agent{Log: filepath.Join(o.Dir, "agent-"+o.Cluster+".log"), binary: o.Binary, args: args}
	if err := a.Start(); err != nil {
		return nil, err
	}
	return a, nil
}

// Start starts the agent again after Stop, with the same flags; its
// output is appended to Log. It does nothing while the agent runs.
func (a *Agent) Start() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cmd != nil {
		return nil
	}
	cmd, err := spawn(a.binary, a.args, a.Log)
	if err != nil {
		return err
	}
	a.cmd = cmd
	return nil
}

// spawn starts binary with args, its output appended to the file log.
func spawn(binary string, args []string, log string) (*exec.Cmd, error) {
	logFile, err := os.OpenFile(log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, fmt.Errorf("twin: %w", err)
	}
	defer logFile.Close()
	cmd := exec.Command(binary, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = procAttr()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("twin: start %s: %w", filepath.Base(binary), err)
	}
	return cmd, nil
}

// Pid returns the agent's process id, or 0 while it is stopped.
func (a *Agent) Pid() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cmd == nil {
		return 0
	}
	return a.cmd.Process.Pid
}

// Stop sends SIGTERM and waits up to 20 s; an unclean or late exit is an
// error (a late one is killed). Stopping a stopped agent does nothing.
func (a *Agent) Stop() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cmd == nil {
		return nil
	}
	cmd := a.cmd
	a.cmd = nil
	_ = cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("twin: setpoint-agent after SIGTERM: %w", err)
		}
		return nil
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		return errors.New("twin: setpoint-agent did not stop within 20s of SIGTERM")
	}
}

// ManifestArgs returns the args of the container named container in the
// Deployment or StatefulSet manifest at path.
func ManifestArgs(path, container string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("twin: %w", err)
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
		return nil, fmt.Errorf("twin: %s: %w", path, err)
	}
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name == container {
			return c.Args, nil
		}
	}
	return nil, fmt.Errorf("twin: %s has no container %q", path, container)
}

// Rewrite returns args (-name=value flags) with the values in set replaced
// and the flags in drop left out; every other flag is kept. A flag of set
// or drop that args lacks is an error: the manifest changed, and its
// caller must say how to run the new one.
func Rewrite(args []string, set map[string]string, drop ...string) ([]string, error) {
	seen := map[string]bool{}
	var out []string
	for _, a := range args {
		name, _, _ := strings.Cut(a, "=")
		seen[name] = true
		if v, ok := set[name]; ok {
			out = append(out, name+"="+v)
		} else if !slices.Contains(drop, name) {
			out = append(out, a)
		}
	}
	for name := range set {
		if !seen[name] {
			return nil, fmt.Errorf("no flag %s in %v", name, args)
		}
	}
	for _, name := range drop {
		if !seen[name] {
			return nil, fmt.Errorf("no flag %s in %v", name, args)
		}
	}
	return out, nil
}

// FreeAddr returns a loopback address that was free a moment ago.
func FreeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("twin: %w", err)
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// Tail returns the last n lines of the file at path.
func Tail(path string, n int) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
