package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/setpointhq/setpoint/agent"
)

// serviceAccountNamespaceFile holds the pod's namespace in a cluster.
const serviceAccountNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// Config is everything setpoint-agent is configured with.
type Config struct {
	// ServiceAddress is the Setpoint service's gRPC address: host:port, a
	// gRPC target, or a comma-separated list of host:port (package
	// clients/go/endpoints).
	ServiceAddress string
	// Insecure talks plaintext gRPC to the service (no TLS).
	Insecure bool
	// CAFile verifies the service's certificate; empty uses the system roots.
	CAFile string
	// CertFile and KeyFile are the client certificate for mutual TLS.
	CertFile, KeyFile string
	// ServerName overrides the name checked in the service's certificate.
	ServerName string
	// TokenFile holds a bearer token sent with every call; it is re-read
	// at each call, so a rotated token is picked up. Without TLS it is
	// sent only to a loopback address.
	TokenFile string
	// ClusterName names this cluster to the service.
	ClusterName string
	// SyncPeriod is how often every Autoscaler is reconciled.
	SyncPeriod time.Duration
	// RecommendTimeout is the deadline of each call to the service.
	RecommendTimeout time.Duration
	// Workers is how many Autoscalers are reconciled concurrently.
	Workers int
	// KubeAPIQPS and KubeAPIBurst limit the requests to the Kubernetes API,
	// all clients together.
	KubeAPIQPS   float64
	KubeAPIBurst int
	// Tolerance, CPUInitializationPeriod, InitialReadinessDelay and
	// DownscaleStabilizationWindow are sent in each request; unset lets
	// the service apply the Kubernetes defaults.
	Tolerance                    optFloat
	CPUInitializationPeriod      optDuration
	InitialReadinessDelay        optDuration
	DownscaleStabilizationWindow optDuration
	// Serve is which kinds the agent serves: autoscalers, hpas or both.
	Serve string
	// ConsoleURL is the Setpoint web console's address, linked from the
	// explanation annotation of each HPA served.
	ConsoleURL string
	// StandDownWindow is how long after another controller's last write
	// of an HPA's status the agent leaves the HPA alone; zero means
	// agent.DefaultStandDownWindowPeriods sync periods.
	StandDownWindow time.Duration
	// Namespace restricts the agent to one namespace; empty means all.
	Namespace string
	// Kubeconfig is the kubeconfig file; empty uses the in-cluster config.
	Kubeconfig string
	// LeaderElect enables leader election; disable it only with one replica.
	LeaderElect bool
	// LeaderElectionNamespace and LeaderElectionName name the Lease.
	LeaderElectionNamespace, LeaderElectionName string
	// LeaderElectionIdentity names this replica in the Lease.
	LeaderElectionIdentity string
	// LeaseDuration, RenewDeadline and RetryPeriod time the election.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// MetricsAddress serves /metrics, /healthz and /readyz.
	MetricsAddress string
	// Profiling serves Go's /debug/pprof/ on MetricsAddress.
	Profiling bool
}

// RegisterFlags registers the configuration's flags on fs with their
// defaults.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	hostname, _ := os.Hostname()
	namespace := "setpoint-system"
	if b, err := os.ReadFile(serviceAccountNamespaceFile); err == nil && len(strings.TrimSpace(string(b))) > 0 {
		namespace = strings.TrimSpace(string(b))
	}
	fs.StringVar(&c.ServiceAddress, "service-address", "setpoint-server.setpoint-system.svc:7443", "the Setpoint service: host:port, dns:///host:port or host:port,host:port,...; calls go round-robin to its healthy addresses")
	fs.BoolVar(&c.Insecure, "insecure", false, "talk plaintext gRPC to the service (no TLS)")
	fs.StringVar(&c.CAFile, "tls-ca-file", "", "PEM CA bundle that verifies the service's certificate (default: system roots)")
	fs.StringVar(&c.CertFile, "tls-cert-file", "", "PEM client certificate for mutual TLS (with -tls-key-file)")
	fs.StringVar(&c.KeyFile, "tls-key-file", "", "PEM client key for mutual TLS (with -tls-cert-file)")
	fs.StringVar(&c.ServerName, "tls-server-name", "", "name expected in the service's certificate (default: the host of -service-address)")
	fs.StringVar(&c.TokenFile, "token-file", "", "file holding a bearer token sent with every call (re-read at each call); sent over TLS, or with -insecure only to a loopback address")
	fs.StringVar(&c.ClusterName, "cluster-name", "default", "name of this cluster, part of every target's key in the service and this cluster's member name in its fleets (spec.fleet); the service's identity for the agent must be cluster:<name>")
	fs.DurationVar(&c.SyncPeriod, "sync-period", agent.DefaultSyncPeriod, "how often every Autoscaler is reconciled")
	fs.DurationVar(&c.RecommendTimeout, "recommend-timeout", agent.DefaultRecommendTimeout, "deadline of each call to the service")
	fs.IntVar(&c.Workers, "workers", agent.DefaultWorkers, "Autoscalers reconciled concurrently")
	fs.Float64Var(&c.KubeAPIQPS, "kube-api-qps", agent.DefaultKubeQPS, "requests per second to the Kubernetes API, all clients together (an unchanged reconcile makes 2)")
	fs.IntVar(&c.KubeAPIBurst, "kube-api-burst", agent.DefaultKubeBurst, "requests to the Kubernetes API allowed at once above -kube-api-qps")
	fs.Var(&c.Tolerance, "tolerance", "default tolerance of the usage ratio, a fraction (0.1 is 10%); unset: the service's default")
	fs.Var(&c.CPUInitializationPeriod, "cpu-initialization-period", "period after a pod starts during which its CPU samples are checked against readiness; unset: the service's default")
	fs.Var(&c.InitialReadinessDelay, "initial-readiness-delay", "period after a pod starts during which an unready pod counts as never ready; unset: the service's default")
	fs.Var(&c.DownscaleStabilizationWindow, "downscale-stabilization-window", "scale-down stabilization window when the spec has no behavior; unset: the service's default")
	fs.StringVar(&c.Serve, "serve", string(agent.ServeAutoscalers), "which kinds the agent serves: autoscalers (setpoint.dev Autoscalers), hpas (autoscaling/v2 HorizontalPodAutoscalers, with kube-controller-manager's HPA controller off: docs/native-hpa.md) or both")
	fs.StringVar(&c.ConsoleURL, "console-url", "", "address of the Setpoint web console (e.g. https://setpoint.example.com/console/), linked from each served HPA's setpoint.dev/explanation annotation; empty names the setpointctl command instead")
	fs.DurationVar(&c.StandDownWindow, "stand-down-window", 0, "how long after another controller last wrote an HPA's status the agent leaves that HPA alone (default: 4 sync periods)")
	fs.StringVar(&c.Namespace, "namespace", "", "reconcile only this namespace's Autoscalers (default: all namespaces)")
	fs.StringVar(&c.Kubeconfig, "kubeconfig", "", "kubeconfig file (default: the in-cluster configuration)")
	fs.BoolVar(&c.LeaderElect, "leader-elect", true, "run only while holding the leader Lease")
	fs.StringVar(&c.LeaderElectionNamespace, "leader-election-namespace", namespace, "namespace of the leader Lease")
	fs.StringVar(&c.LeaderElectionName, "leader-election-name", "setpoint-agent", "name of the leader Lease")
	fs.StringVar(&c.LeaderElectionIdentity, "leader-election-identity", hostname, "this replica's identity in the leader Lease")
	fs.DurationVar(&c.LeaseDuration, "leader-election-lease-duration", 15*time.Second, "how long a lease is valid without renewal")
	fs.DurationVar(&c.RenewDeadline, "leader-election-renew-deadline", 10*time.Second, "how long the leader retries renewing before giving up")
	fs.DurationVar(&c.RetryPeriod, "leader-election-retry-period", 2*time.Second, "how often acquiring or renewing the lease is tried")
	fs.StringVar(&c.MetricsAddress, "metrics-address", ":8080", "address serving /metrics, /healthz and /readyz; empty disables")
	fs.BoolVar(&c.Profiling, "profiling", false, "also serve Go's /debug/pprof/ on -metrics-address")
}

// Validate checks the values; it reads no file and opens no connection.
func (c *Config) Validate() error {
	var errs []error
	if c.ServiceAddress == "" {
		errs = append(errs, errors.New("-service-address is required"))
	}
	if (c.CertFile == "") != (c.KeyFile == "") {
		errs = append(errs, errors.New("-tls-cert-file and -tls-key-file go together"))
	}
	if c.Insecure && (c.CAFile != "" || c.CertFile != "" || c.ServerName != "") {
		errs = append(errs, errors.New("-insecure excludes the -tls-* flags"))
	}
	if _, err := agent.ParseServe(c.Serve); err != nil {
		errs = append(errs, fmt.Errorf("-serve %q must be autoscalers, hpas or both", c.Serve))
	}
	if c.StandDownWindow < 0 {
		errs = append(errs, errors.New("-stand-down-window must not be negative"))
	}
	if c.ConsoleURL != "" {
		if u, err := url.Parse(c.ConsoleURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("-console-url %q must be an http or https URL", c.ConsoleURL))
		}
	}
	if c.ClusterName == "" {
		errs = append(errs, errors.New("-cluster-name is required"))
	}
	if c.SyncPeriod <= 0 {
		errs = append(errs, errors.New("-sync-period must be positive"))
	}
	if c.RecommendTimeout <= 0 {
		errs = append(errs, errors.New("-recommend-timeout must be positive"))
	}
	if c.Workers < 1 {
		errs = append(errs, errors.New("-workers must be at least 1"))
	}
	if c.KubeAPIQPS <= 0 || c.KubeAPIBurst < 1 {
		errs = append(errs, errors.New("-kube-api-qps must be positive and -kube-api-burst at least 1"))
	}
	if c.Tolerance.set && (c.Tolerance.v < 0 || c.Tolerance.v >= 1) {
		errs = append(errs, errors.New("-tolerance must be in [0, 1)"))
	}
	for name, d := range map[string]optDuration{
		"-cpu-initialization-period":      c.CPUInitializationPeriod,
		"-initial-readiness-delay":        c.InitialReadinessDelay,
		"-downscale-stabilization-window": c.DownscaleStabilizationWindow,
	} {
		if d.set && d.v < 0 {
			errs = append(errs, fmt.Errorf("%s must not be negative", name))
		}
	}
	if c.LeaderElect {
		if c.LeaderElectionNamespace == "" || c.LeaderElectionName == "" || c.LeaderElectionIdentity == "" {
			errs = append(errs, errors.New("-leader-election-namespace, -leader-election-name and -leader-election-identity are required with -leader-elect"))
		}
		if c.LeaseDuration <= c.RenewDeadline || c.RenewDeadline <= c.RetryPeriod || c.RetryPeriod <= 0 {
			errs = append(errs, errors.New("leader election needs lease-duration > renew-deadline > retry-period > 0"))
		}
	}
	return errors.Join(errs...)
}

// flagGroups orders the agent's flags in -help; every flag RegisterFlags
// registers is in one group.
var flagGroups = []struct {
	title string
	flags []string
}{
	{"Setpoint service", []string{"service-address", "insecure", "tls-ca-file", "tls-cert-file", "tls-key-file", "tls-server-name", "token-file", "recommend-timeout"}},
	{"Kubernetes", []string{"kubeconfig", "serve", "stand-down-window", "namespace", "cluster-name", "console-url", "kube-api-qps", "kube-api-burst"}},
	{"Reconciling", []string{"sync-period", "workers"}},
	{"Decision settings (sent with each request; unset: the service's default)", []string{"tolerance", "cpu-initialization-period", "initial-readiness-delay", "downscale-stabilization-window"}},
	{"Leader election", []string{"leader-elect", "leader-election-namespace", "leader-election-name", "leader-election-identity", "leader-election-lease-duration", "leader-election-renew-deadline", "leader-election-retry-period"}},
	{"Serving", []string{"metrics-address", "profiling"}},
}

// usage writes -help: the agent's flags by group, one line each, then the
// names of the logging flags (logging) on a line of their own.
func usage(w io.Writer, fs, logging *flag.FlagSet) {
	fmt.Fprintf(w, "Usage: %s [flags]\n\nReconciles Autoscalers (and, with -serve, HorizontalPodAutoscalers) with decisions from the Setpoint service.\n", fs.Name())
	for _, g := range flagGroups {
		fmt.Fprintf(w, "\n%s:\n", g.title)
		for _, name := range g.flags {
			f := fs.Lookup(name)
			if f == nil {
				continue
			}
			typ, text := flag.UnquoteUsage(f)
			switch f.Value.(type) {
			case *optFloat:
				typ = "float"
			case *optDuration:
				typ = "duration"
			}
			left := "-" + f.Name
			if typ != "" {
				left += " " + typ
			}
			if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" {
				text += " (default " + f.DefValue + ")"
			}
			fmt.Fprintf(w, "  %-42s %s\n", left, text)
		}
	}
	var names []string
	logging.VisitAll(func(f *flag.Flag) {
		if f.Name != "v" {
			names = append(names, "-"+f.Name)
		}
	})
	fmt.Fprintf(w, "\nLogging (klog): -v LEVEL sets the verbosity; also %s.\n", strings.Join(names, ", "))
}

// Settings returns the controller settings sent in each request.
func (c *Config) Settings() agent.Settings {
	return agent.Settings{
		Tolerance:                    c.Tolerance.ptr(),
		CPUInitializationPeriod:      c.CPUInitializationPeriod.ptr(),
		InitialReadinessDelay:        c.InitialReadinessDelay.ptr(),
		DownscaleStabilizationWindow: c.DownscaleStabilizationWindow.ptr(),
	}
}

// optFloat is a float flag that remembers whether it was set.
type optFloat struct {
	v   float64
	set bool
}

// String implements flag.Value.
func (o *optFloat) String() string {
	if o == nil || !o.set {
		return ""
	}
	return strconv.FormatFloat(o.v, 'g', -1, 64)
}

// Set implements flag.Value.
func (o *optFloat) Set(s string) error {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return err
	}
	o.v, o.set = v, true
	return nil
}

func (o *optFloat) ptr() *float64 {
	if !o.set {
		return nil
	}
	v := o.v
	return &v
}

// optDuration is a duration flag that remembers whether it was set.
type optDuration struct {
	v   time.Duration
	set bool
}

// String implements flag.Value.
func (o *optDuration) String() string {
	if o == nil || !o.set {
		return ""
	}
	return o.v.String()
}

// Set implements flag.Value.
func (o *optDuration) Set(s string) error {
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	o.v, o.set = v, true
	return nil
}

func (o *optDuration) ptr() *time.Duration {
	if !o.set {
		return nil
	}
	v := o.v
	return &v
}
