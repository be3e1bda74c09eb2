package kubetest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/setpointhq/setpoint/internal/testpki"
)

// Defaults for Options.
const (
	// DefaultReadyTimeout bounds how long Start waits for etcd and the
	// kube-apiserver to become ready once the binaries are available.
	DefaultReadyTimeout = 90 * time.Second

	// ServiceAccountIssuer is the issuer of service-account tokens.
	ServiceAccountIssuer = "https://kubernetes.default.svc.cluster.local"

	// ServiceClusterIPRange is the range Services get their cluster IPs from.
	// Nothing routes these addresses; see the package doc.
	ServiceClusterIPRange = "10.96.0.0/24"

	// AdminUser is the user name of the admin identity; it is in the
	// system:masters group, which RBAC lets do anything.
	AdminUser = "setpoint-admin"

	// FrontProxyClientName is the common name of the certificate the
	// kube-apiserver presents to aggregated API servers.
	FrontProxyClientName = "front-proxy-client"
)

// clientQPS and clientBurst are the client-side rate limits of the configs
// the harness returns: high enough that client-go never throttles a test.
const (
	clientQPS   = 200
	clientBurst = 400
)

// Options configures Start. The zero value is ready to use.
type Options struct {
	// BinDir is the directory with the kube-apiserver and etcd binaries.
	// Empty means $SETPOINT_KUBE_BIN_DIR, and failing that the directory
	// hack/kube-binaries.sh builds (minutes the first time, cached after).
	BinDir string

	// APIServerFlags are extra kube-apiserver flags, appended after the
	// harness's own, so that for single-valued flags they win
	// (for example "--feature-gates=..." or "--v=4").
	APIServerFlags []string

	// ReadyTimeout bounds the wait for etcd and the kube-apiserver to become
	// ready. Zero means DefaultReadyTimeout.
	ReadyTimeout time.Duration

	// CRDs are CustomResourceDefinition manifests (one YAML document each,
	// for example AutoscalerCRD's) that Start installs, as InstallCRD does,
	// before it returns.
	CRDs [][]byte

	// EtcdURL, when not empty, is the client URL of an etcd that another
	// Cluster runs (its EtcdURL): this cluster starts no etcd of its own
	// and keeps its objects there under EtcdPrefix, so that several API
	// servers share one etcd process. The etcd's owner must outlive this
	// cluster.
	EtcdURL string

	// EtcdPrefix is the kube-apiserver's --etcd-prefix. Empty means the
	// apiserver's default, "/registry"; clusters sharing an etcd need
	// distinct prefixes.
	EtcdPrefix string
}

// Cluster is a running etcd and kube-apiserver on loopback. Its methods are
// safe for concurrent use. Stop it when done; StartT does that in t.Cleanup.
type Cluster struct {
	dir          string
	binDir       string // where the binaries are, for StartControllerManager
	etcdURL      string
	host         string
	caPEM        []byte
	clientCA     *testpki.CA
	frontProxyCA *testpki.CA
	admin        *rest.Config
	client       kubernetes.Interface
	dynamic      dynamic.Interface

	etcd      *process
	apiserver *process
	// apiserverPath and apiserverArgs start the kube-apiserver again on
	// the same port (RestartAPIServer); restarts counts those restarts.
	apiserverPath string
	apiserverArgs []string
	restarts      int
	// controllerManagers are the kube-controller-managers started by
	// StartControllerManager, killed by Stop.
	controllerManagers []*process
	mu                 sync.Mutex // guards apiserver, restarts and controllerManagers

	stopOnce sync.Once
	stopErr  error
}

// StartT starts a cluster for the test and stops it in t.Cleanup. It fails
// the test if the cluster does not start. When the test has failed by
// cleanup time, the end of both server logs is written to the test log.
func StartT(t testing.TB, opts Options) *Cluster {
	t.Helper()
	c, err := Start(t.Context(), opts)
	if err != nil {
		t.Fatalf("start kube-apiserver: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("kube-apiserver log (last lines):\n%s", c.apiserver.logTail(40))
			if c.etcd != nil {
				t.Logf("etcd log (last lines):\n%s", c.etcd.logTail(20))
			}
		}
		if err := c.Stop(); err != nil {
			t.Errorf("stop cluster: %v", err)
		}
	})
	return c
}

// Start starts etcd and a kube-apiserver on free loopback ports, waits until
// the apiserver reports ready and the system namespaces exist, and returns
// the running cluster. ctx bounds the start only, not the cluster's life.
//
// Every call makes a new certificate authority, new credentials and an empty
// etcd in a new temporary directory, which Stop removes.
func Start(ctx context.Context, opts Options) (_ *Cluster, err error) {
	if opts.ReadyTimeout == 0 {
		opts.ReadyTimeout = DefaultReadyTimeout
	}
	bin, err := binDir(ctx, opts.BinDir)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "setpoint-kube-")
	if err != nil {
		return nil, fmt.Errorf("kubetest: %w", err)
	}
	c := &Cluster{dir: dir, binDir: bin}
	defer func() {
		if err != nil {
			_ = c.Stop()
		}
	}()

	ctx, cancel := context.WithTimeout(ctx, opts.ReadyTimeout)
	defer cancel()
	apiserverArgs, err := c.writeCredentials()
	if err != nil {
		return nil, err
	}
	if opts.EtcdURL != "" {
		c.etcdURL = opts.EtcdURL
	} else if err := c.startEtcd(ctx, filepath.Join(bin, "etcd")); err != nil {
		return nil, err
	}
	if opts.EtcdPrefix != "" {
		apiserverArgs = append(apiserverArgs, "--etcd-prefix="+opts.EtcdPrefix)
	}
	if err := c.startAPIServer(ctx, filepath.Join(bin, "kube-apiserver"), append(apiserverArgs, opts.APIServerFlags...)); err != nil {
		return nil, err
	}
	for _, crd := range opts.CRDs {
		if err := c.InstallCRD(ctx, crd); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// writeCredentials creates the certificate authorities, the serving and
// client certificates and the service-account key under c.dir, and returns
// the kube-apiserver flags that refer to them.
func (c *Cluster) writeCredentials() ([]string, error) {
	pkiDir := filepath.Join(c.dir, "pki")
	if err := os.Mkdir(pkiDir, 0o700); err != nil {
		return nil, fmt.Errorf("kubetest: %w", err)
	}
	serverCA, err := testpki.NewCA("setpoint-kubetest-ca")
	if err != nil {
		return nil, err
	}
	if c.clientCA, err = testpki.NewCA("setpoint-kubetest-client-ca"); err != nil {
		return nil, err
	}
	if c.frontProxyCA, err = testpki.NewCA("setpoint-kubetest-front-proxy-ca"); err != nil {
		return nil, err
	}
	c.caPEM = serverCA.PEM

	serving, err := serverCA.Sign(testpki.Leaf{
		CommonName: "kube-apiserver", Server: true,
		DNSNames: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
		IPs:      []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback, net.ParseIP("10.96.0.1")},
	})
	if err != nil {
		return nil, err
	}
	servingCert, servingKey, err := serving.WriteFiles(pkiDir, "apiserver")
	if err != nil {
		return nil, err
	}
	proxyClient, err := c.frontProxyCA.Sign(testpki.Leaf{CommonName: FrontProxyClientName})
	if err != nil {
		return nil, err
	}
	proxyCert, proxyKey, err := proxyClient.WriteFiles(pkiDir, "front-proxy-client")
	if err != nil {
		return nil, err
	}
	saPrivate, saPublic, err := testpki.NewSigningKey()
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{
		"client-ca.crt":      c.clientCA.PEM,
		"front-proxy-ca.crt": c.frontProxyCA.PEM,
		"sa.key":             saPrivate,
		"sa.pub":             saPublic,
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(pkiDir, name), data, 0o600); err != nil {
			return nil, fmt.Errorf("kubetest: %w", err)
		}
	}

	admin, err := c.clientCA.Sign(testpki.Leaf{CommonName: AdminUser, Groups: []string{"system:masters"}})
	if err != nil {
		return nil, err
	}
	c.admin = &rest.Config{
		TLSClientConfig: rest.TLSClientConfig{CAData: c.caPEM, CertData: admin.CertPEM, KeyData: admin.KeyPEM},
		QPS:             clientQPS,
		Burst:           clientBurst,
	}

	return []string{
		"--tls-cert-file=" + servingCert,
		"--tls-private-key-file=" + servingKey,
		"--client-ca-file=" + filepath.Join(pkiDir, "client-ca.crt"),
		"--service-account-issuer=" + ServiceAccountIssuer,
		"--service-account-key-file=" + filepath.Join(pkiDir, "sa.pub"),
		"--service-account-signing-key-file=" + filepath.Join(pkiDir, "sa.key"),
		// Aggregation layer: the apiserver authenticates to aggregated API
		// servers with this client certificate and passes the user on in
		// the X-Remote-* headers, which they trust because of the CA.
		"--requestheader-client-ca-file=" + filepath.Join(pkiDir, "front-proxy-ca.crt"),
		"--requestheader-allowed-names=" + FrontProxyClientName,
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--proxy-client-cert-file=" + proxyCert,
		"--proxy-client-key-file=" + proxyKey,
	}, nil
}

// startEtcd starts a single-member etcd with plain HTTP on loopback and waits
// for its health endpoint. A port taken between choosing and binding it is
// retried with new ports.
func (c *Cluster) startEtcd(ctx context.Context, path string) error {
	for attempt := 0; ; attempt++ {
		ports, err := freePorts(2)
		if err != nil {
			return err
		}
		clientURL := "http://127.0.0.1:" + strconv.Itoa(ports[0])
		peerURL := "http://127.0.0.1:" + strconv.Itoa(ports[1])
		dataDir := filepath.Join(c.dir, "etcd-data")
		if err := os.RemoveAll(dataDir); err != nil {
			return fmt.Errorf("kubetest: %w", err)
		}
		p, err := startProcess("etcd", path, []string{
			"--name=kubetest",
			"--data-dir=" + dataDir,
			"--listen-client-urls=" + clientURL,
			"--advertise-client-urls=" + clientURL,
			"--listen-peer-urls=" + peerURL,
			"--initial-advertise-peer-urls=" + peerURL,
			"--initial-cluster=kubetest=" + peerURL,
			"--initial-cluster-state=new",
			// The data is thrown away with the test; skipping fsync makes
			// every write several times faster on slow disks.
			"--unsafe-no-fsync",
			"--log-level=warn",
		}, filepath.Join(c.dir, "etcd.log"))
		if err != nil {
			return err
		}
		c.etcd, c.etcdURL = p, clientURL
		err = waitReady(ctx, p, func(ctx context.Context) bool {
			return httpOK(ctx, http.DefaultClient, clientURL+"/health")
		})
		if err == nil {
			return nil
		}
		if attempt < 2 && p.exited() && p.logContains("address already in use") {
			continue
		}
		return err
	}
}

// startAPIServer starts the kube-apiserver on a free loopback port and waits
// for /readyz and the system namespaces.
func (c *Cluster) startAPIServer(ctx context.Context, path string, credentialArgs []string) error {
	for attempt := 0; ; attempt++ {
		ports, err := freePorts(1)
		if err != nil {
			return err
		}
		args := append([]string{
			"--bind-address=127.0.0.1",
			"--secure-port=" + strconv.Itoa(ports[0]),
			"--advertise-address=127.0.0.1",
			// The kubernetes Service cannot have a loopback endpoint.
			"--endpoint-reconciler-type=none",
			"--cert-dir=" + filepath.Join(c.dir, "apiserver-certs"),
			"--etcd-servers=" + c.etcdURL,
			"--authorization-mode=RBAC",
			"--service-cluster-ip-range=" + ServiceClusterIPRange,
			// No controller manager runs, so nothing creates the "default"
			// ServiceAccount this plugin would insist on for every Pod.
			"--disable-admission-plugins=ServiceAccount",
			"--profiling=false",
		}, credentialArgs...)
		p, err := startProcess("kube-apiserver", path, args, filepath.Join(c.dir, "kube-apiserver.log"))
		if err != nil {
			return err
		}
		c.apiserver, c.apiserverPath, c.apiserverArgs = p, path, args
		c.host = "https://127.0.0.1:" + strconv.Itoa(ports[0])
		c.admin.Host = c.host
		if c.client, err = kubernetes.NewForConfig(c.admin); err != nil {
			return fmt.Errorf("kubetest: %w", err)
		}
		if c.dynamic, err = dynamic.NewForConfig(c.admin); err != nil {
			return fmt.Errorf("kubetest: %w", err)
		}
		err = waitReady(ctx, p, c.ready)
		if err == nil {
			return nil
		}
		if attempt < 2 && p.exited() && p.logContains("address already in use") {
			continue
		}
		return err
	}
}

// RestartAPIServer kills the kube-apiserver with SIGKILL, as a crash
// would, starts it again with the same flags on the same port, and waits
// until it is ready. etcd, and so every object, is kept; clients keep
// their configuration and reconnect.
func (c *Cluster) RestartAPIServer(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.apiserver.kill(30 * time.Second); err != nil {
		return err
	}
	c.restarts++
	logPath := filepath.Join(c.dir, fmt.Sprintf("kube-apiserver.restart-%d.log", c.restarts))
	// The port was the old process's until a moment ago: retry briefly
	// while the kernel releases it.
	deadline := time.Now().Add(30 * time.Second)
	for {
		p, err := startProcess("kube-apiserver", c.apiserverPath, c.apiserverArgs, logPath)
		if err != nil {
			return err
		}
		c.apiserver = p
		err = waitReady(ctx, p, c.ready)
		if err == nil || !p.exited() || !p.logContains("address already in use") || time.Now().After(deadline) {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// ready reports whether /readyz answers ok and the namespaces that tests and
// the metrics server registration rely on exist.
func (c *Cluster) ready(ctx context.Context) bool {
	body, err := c.client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	if err != nil || string(body) != "ok" {
		return false
	}
	for _, ns := range []string{metav1.NamespaceDefault, metav1.NamespaceSystem} {
		if _, err := c.client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); err != nil {
			return false
		}
	}
	return true
}

// waitReady polls ready until it reports true, the process exits or ctx ends.
func waitReady(ctx context.Context, p *process, ready func(context.Context) bool) error {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		if p.exited() {
			return p.exitError()
		}
		attemptCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
		ok := ready(attemptCtx)
		cancel()
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kubetest: %s not ready: %w; last log lines:\n%s", p.name, ctx.Err(), p.logTail(30))
		case <-p.done:
		case <-tick.C:
		}
	}
}

func httpOK(ctx context.Context, client *http.Client, url string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := client.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// freePorts returns n distinct loopback TCP ports that were free a moment
// ago. The listeners are closed before the servers bind, so another process
// can take a port in between; the start functions retry when that happens.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("kubetest: find free port: %w", err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// Stop kills the kube-apiserver and etcd and removes the temporary
// directory. It is idempotent; later calls return the first call's error.
func (c *Cluster) Stop() error {
	c.stopOnce.Do(func() {
		var errs []error
		c.mu.Lock()
		procs := append([]*process{}, c.controllerManagers...)
		c.mu.Unlock()
		for _, p := range append(procs, c.apiserver, c.etcd) {
			if p != nil {
				errs = append(errs, p.kill(30*time.Second))
			}
		}
		if c.dir != "" {
			errs = append(errs, os.RemoveAll(c.dir))
		}
		c.stopErr = errors.Join(errs...)
	})
	return c.stopErr
}

// Config returns a new copy of the admin client configuration: a client
// certificate for AdminUser in the system:masters group.
func (c *Cluster) Config() *rest.Config { return rest.CopyConfig(c.admin) }

// Client returns a clientset for the admin identity.
func (c *Cluster) Client() kubernetes.Interface { return c.client }

// Dynamic returns a dynamic client for the admin identity, for custom
// resources such as Autoscalers.
func (c *Cluster) Dynamic() dynamic.Interface { return c.dynamic }

// Host returns the kube-apiserver URL, "https://127.0.0.1:<port>".
func (c *Cluster) Host() string { return c.host }

// EtcdURL returns the client URL of the etcd the apiserver stores data in.
func (c *Cluster) EtcdURL() string { return c.etcdURL }

// CAPEM returns the certificate authority that signed the apiserver's
// serving certificate.
func (c *Cluster) CAPEM() []byte { return append([]byte(nil), c.caPEM...) }

// FrontProxyCAPEM returns the certificate authority of the client
// certificate (common name FrontProxyClientName) the apiserver presents when
// it proxies to an aggregated API server.
func (c *Cluster) FrontProxyCAPEM() []byte { return c.frontProxyCA.PEM }

// Dir returns the cluster's temporary directory: certificates, etcd data and
// the etcd.log and kube-apiserver.log files. Stop removes it.
func (c *Cluster) Dir() string { return c.dir }

// UserConfig returns a client configuration that authenticates as user in
// groups with a client certificate. RBAC gives such a user no rights beyond
// those of system:authenticated until the test binds roles to it.
func (c *Cluster) UserConfig(user string, groups ...string) (*rest.Config, error) {
	cert, err := c.clientCA.Sign(testpki.Leaf{CommonName: user, Groups: groups})
	if err != nil {
		return nil, err
	}
	return &rest.Config{
		Host:            c.host,
		TLSClientConfig: rest.TLSClientConfig{CAData: c.caPEM, CertData: cert.CertPEM, KeyData: cert.KeyPEM},
		QPS:             clientQPS,
		Burst:           clientBurst,
	}, nil
}

// ServiceAccountConfig returns a client configuration that authenticates as
// the ServiceAccount namespace/name with a bound token valid for an hour.
// It creates the ServiceAccount if it does not exist; the namespace must.
// As for a real workload, RBAC gives it no rights until the test binds roles
// to "system:serviceaccount:<namespace>:<name>".
func (c *Cluster) ServiceAccountConfig(ctx context.Context, namespace, name string) (*rest.Config, error) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	_, err := c.client.CoreV1().ServiceAccounts(namespace).Create(ctx, sa, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("kubetest: create service account %s/%s: %w", namespace, name, err)
	}
	expiry := int64(time.Hour / time.Second)
	tr, err := c.client.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("kubetest: token for service account %s/%s: %w", namespace, name, err)
	}
	return &rest.Config{
		Host:            c.host,
		BearerToken:     tr.Status.Token,
		TLSClientConfig: rest.TLSClientConfig{CAData: c.caPEM},
		QPS:             clientQPS,
		Burst:           clientBurst,
	}, nil
}

// Pids returns the process ids of the cluster's kube-apiserver and, when
// it runs one, its etcd, by name.
func (c *Cluster) Pids() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{"kube-apiserver": c.apiserver.cmd.Process.Pid}
	if c.etcd != nil {
		out["etcd"] = c.etcd.cmd.Process.Pid
	}
	return out
}
