// Package metricsserver is a fake metrics API server for end-to-end tests:
// an HTTPS server on 127.0.0.1 that serves the three metrics APIs an
// autoscaler reads, with values the test sets.
//
//   - metrics.k8s.io/v1beta1: PodMetrics, listed by namespace and label
//     selector or read by name (what metrics-server serves);
//   - custom.metrics.k8s.io/v1beta2: metrics of pods chosen by a label
//     selector (/namespaces/{ns}/pods/*/{metric}), of one object
//     (/namespaces/{ns}/{resource}/{name}/{metric}) and of a namespace
//     (/namespaces/{ns}/metrics/{metric});
//   - external.metrics.k8s.io/v1beta1: /namespaces/{ns}/{metric}, filtered
//     by a label selector on the metric's labels.
//
// Each API also serves its discovery document, so the clients of
// k8s.io/metrics work unchanged. Register makes the kube-apiserver's
// aggregation layer route the three groups here; after that, tests and the
// agent under test read metrics through the apiserver exactly as in a real
// cluster, including its authentication and RBAC checks.
//
// The server does not look at Pods in the cluster: a label selector is
// matched against the labels given with each value. SetUnavailable makes a
// metric answer 503, as an adapter does when its backend is down.
package metricsserver

import (
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	custommetricsv1beta2 "k8s.io/metrics/pkg/apis/custom_metrics/v1beta2"
	externalmetricsv1beta1 "k8s.io/metrics/pkg/apis/external_metrics/v1beta1"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"

	"github.com/setpointhq/setpoint/internal/testpki"
)

// API names one of the three metrics APIs by its group.
type API string

// The metrics APIs the server serves.
const (
	// ResourceMetrics is metrics.k8s.io, served at version v1beta1.
	ResourceMetrics API = "metrics.k8s.io"
	// CustomMetrics is custom.metrics.k8s.io, served at version v1beta2.
	CustomMetrics API = "custom.metrics.k8s.io"
	// ExternalMetrics is external.metrics.k8s.io, served at version v1beta1.
	ExternalMetrics API = "external.metrics.k8s.io"
)

// version returns the one version the server serves for the API.
func (a API) version() string {
	if a == CustomMetrics {
		return "v1beta2"
	}
	return "v1beta1"
}

// groupVersion returns "<group>/<version>".
func (a API) groupVersion() string { return string(a) + "/" + a.version() }

// APIs lists the served APIs.
var APIs = []API{ResourceMetrics, CustomMetrics, ExternalMetrics}

// Defaults for Options.
const (
	// DefaultServiceNamespace is the namespace of the Service Register creates.
	DefaultServiceNamespace = "kube-system"
	// DefaultServiceName is the name of the Service Register creates.
	DefaultServiceName = "kubetest-metrics"
	// DefaultWindow is the measurement window reported with every value.
	DefaultWindow = 30 * time.Second
)

// maxRecorded bounds the requests Requests keeps.
const maxRecorded = 1000

// Options configures Start. The zero value is ready to use.
type Options struct {
	// ServiceNamespace and ServiceName name the Service that Register
	// creates and that the serving certificate is issued for. Empty means
	// DefaultServiceNamespace and DefaultServiceName.
	ServiceNamespace, ServiceName string

	// ClientCA, when not empty, is a PEM bundle the server requires client
	// certificates to chain to, as a real aggregated API server does. Pass
	// the cluster's front-proxy CA (kubetest.Cluster.FrontProxyCAPEM).
	ClientCA []byte

	// Now returns the time stamped on values that do not carry one.
	// Nil means time.Now.
	Now func() time.Time

	// Window is the measurement window reported with every value.
	// Zero means DefaultWindow.
	Window time.Duration
}

// CustomMetric is one value of custom.metrics.k8s.io: a metric of a
// Kubernetes object.
type CustomMetric struct {
	// Resource is the object's resource as clients address it: "pods",
	// "services", or "<resource>.<group>" such as "deployments.apps".
	// For a metric of a namespace use "namespaces", with Name set to the
	// namespace and Namespace empty.
	Resource string
	// Namespace is the object's namespace; empty for cluster-scoped objects.
	Namespace string
	// Name is the object's name.
	Name string
	// Kind and APIVersion describe the object in the answer (for example
	// "Pod" and "v1"); they are informational.
	Kind, APIVersion string
	// Labels are the object's labels, which a label selector is matched against.
	Labels map[string]string

	// Metric is the metric name.
	Metric string
	// MetricLabels are the labels of the series, which a metric label
	// selector is matched against.
	MetricLabels map[string]string
	// Value is the metric value.
	Value resource.Quantity
	// Timestamp is when the value was measured; zero means Options.Now().
	Timestamp time.Time
}

// ExternalMetric is one series of external.metrics.k8s.io.
type ExternalMetric struct {
	// Namespace is the namespace the metric is requested in.
	Namespace string
	// Metric is the metric name.
	Metric string
	// Labels are the series labels, which a label selector is matched against.
	Labels map[string]string
	// Value is the metric value.
	Value resource.Quantity
	// Timestamp is when the value was measured; zero means Options.Now().
	Timestamp time.Time
}

// Request is a request the server received, for asserting on the identity
// the aggregation layer passed on.
type Request struct {
	// Method and Path are the HTTP method and URL path.
	Method, Path string
	// Query is the raw query string.
	Query string
	// User and Groups are the X-Remote-User and X-Remote-Group headers the
	// kube-apiserver sets when it proxies.
	User   string
	Groups []string
}

// Server is a running fake metrics API server. Its methods are safe for
// concurrent use.
type Server struct {
	opts     Options
	caPEM    []byte
	listener net.Listener
	http     *http.Server
	served   chan struct{} // closed when Serve has returned

	mu          sync.Mutex
	pods        map[objectKey]metricsv1beta1.PodMetrics
	custom      map[customKey]CustomMetric
	external    map[externalKey]ExternalMetric
	unavailable map[unavailableKey]bool
	requests    []Request
}

type objectKey struct{ namespace, name string }

type customKey struct{ resource, namespace, name, metric string }

type externalKey struct{ namespace, metric, labels string }

type unavailableKey struct {
	api    API
	metric string
}

// StartT starts a server for the test and closes it in t.Cleanup.
func StartT(t testing.TB, opts Options) *Server {
	t.Helper()
	s, err := Start(opts)
	if err != nil {
		t.Fatalf("start metrics server: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close metrics server: %v", err)
		}
	})
	return s
}

// Start starts a server on a free port of 127.0.0.1 with a serving
// certificate from a new certificate authority (see CAPEM).
func Start(opts Options) (*Server, error) {
	if opts.ServiceNamespace == "" {
		opts.ServiceNamespace = DefaultServiceNamespace
	}
	if opts.ServiceName == "" {
		opts.ServiceName = DefaultServiceName
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Window == 0 {
		opts.Window = DefaultWindow
	}
	ca, err := testpki.NewCA("kubetest-metrics-ca")
	if err != nil {
		return nil, err
	}
	svc := opts.ServiceName + "." + opts.ServiceNamespace + ".svc"
	serving, err := ca.Sign(testpki.Leaf{CommonName: svc, Server: true, DNSNames: []string{svc, svc + ".cluster.local", "localhost"}, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}})
	if err != nil {
		return nil, err
	}
	cert := serving.Cert
	tlsConfig := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if len(opts.ClientCA) > 0 {
		pool, err := certPool(opts.ClientCA)
		if err != nil {
			return nil, err
		}
		tlsConfig.ClientCAs = pool
		tlsConfig.ClientAuth = tls.RequireAndVerifyClientCert
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("metricsserver: listen: %w", err)
	}
	s := &Server{
		opts:        opts,
		caPEM:       ca.PEM,
		listener:    l,
		served:      make(chan struct{}),
		pods:        map[objectKey]metricsv1beta1.PodMetrics{},
		custom:      map[customKey]CustomMetric{},
		external:    map[externalKey]ExternalMetric{},
		unavailable: map[unavailableKey]bool{},
	}
	s.http = &http.Server{Handler: s, TLSConfig: tlsConfig, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		defer close(s.served)
		_ = s.http.ServeTLS(l, "", "")
	}()
	return s, nil
}

// Close stops the server and waits for it to finish.
func (s *Server) Close() error {
	err := s.http.Close()
	<-s.served
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Port returns the port the server listens on at 127.0.0.1.
func (s *Server) Port() int { return s.listener.Addr().(*net.TCPAddr).Port }

// URL returns the server's base URL, "https://127.0.0.1:<port>".
func (s *Server) URL() string { return "https://" + s.listener.Addr().String() }

// CAPEM returns the certificate authority of the serving certificate, which
// is valid for 127.0.0.1, localhost and the Service name.
func (s *Server) CAPEM() []byte { return append([]byte(nil), s.caPEM...) }

// SetPodMetrics sets the PodMetrics served for pm's namespace and name,
// replacing any earlier one. Label selectors are matched against pm.Labels.
// A zero Timestamp or Window is filled in when served.
func (s *Server) SetPodMetrics(pm metricsv1beta1.PodMetrics) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pods[objectKey{pm.Namespace, pm.Name}] = *pm.DeepCopy()
}

// ReplacePodMetrics sets, at once, the PodMetrics of many pods and removes
// those of the pods named in remove (namespace/name pairs as
// metav1.ObjectMeta): no request sees some of the changes without the
// others, as a metric timeline's step needs.
func (s *Server) ReplacePodMetrics(set []metricsv1beta1.PodMetrics, remove []metav1.ObjectMeta) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, pm := range set {
		s.pods[objectKey{pm.Namespace, pm.Name}] = *pm.DeepCopy()
	}
	for _, m := range remove {
		delete(s.pods, objectKey{m.Namespace, m.Name})
	}
}

// SetPodUsage is SetPodMetrics for a pod with one container, named "app",
// using usage (for example {cpu: 250m, memory: 64Mi}).
func (s *Server) SetPodUsage(namespace, name string, podLabels map[string]string, usage corev1.ResourceList) {
	s.SetPodMetrics(metricsv1beta1.PodMetrics{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: podLabels},
		Containers: []metricsv1beta1.ContainerMetrics{{Name: "app", Usage: usage}},
	})
}

// DeletePodMetrics removes the PodMetrics of namespace/name, as
// metrics-server does for a pod it has no samples of yet.
func (s *Server) DeletePodMetrics(namespace, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.pods, objectKey{namespace, name})
}

// SetCustomMetric sets the value of m.Metric for the object m describes,
// replacing any earlier value for the same object and metric.
func (s *Server) SetCustomMetric(m CustomMetric) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.custom[customKey{m.Resource, m.Namespace, m.Name, m.Metric}] = m
}

// DeleteCustomMetric removes the value of metric for an object.
func (s *Server) DeleteCustomMetric(resource, namespace, name, metric string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.custom, customKey{resource, namespace, name, metric})
}

// SetExternalMetric sets one series of an external metric, replacing any
// earlier series with the same namespace, name and labels.
func (s *Server) SetExternalMetric(m ExternalMetric) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.external[externalKey{m.Namespace, m.Metric, labels.Set(m.Labels).String()}] = m
}

// DeleteExternalMetric removes every series of an external metric in namespace.
func (s *Server) DeleteExternalMetric(namespace, metric string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k := range s.external {
		if k.namespace == namespace && k.metric == metric {
			delete(s.external, k)
		}
	}
}

// SetUnavailable makes requests for a metric answer 503 Service Unavailable
// while unavailable is true. For ResourceMetrics the metric is the resource,
// "pods" or "nodes". An empty metric covers the whole API except its
// discovery document, so the APIService stays Available.
func (s *Server) SetUnavailable(api API, metric string, unavailable bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := unavailableKey{api, metric}
	if unavailable {
		s.unavailable[k] = true
	} else {
		delete(s.unavailable, k)
	}
}

// Reset removes every value and every SetUnavailable setting.
func (s *Server) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.pods)
	clear(s.custom)
	clear(s.external)
	clear(s.unavailable)
}

// Requests returns the requests received so far (the most recent ones when
// there were many), oldest first.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

// ServeHTTP routes a request to the API it addresses.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.record(r)
	if r.Method != http.MethodGet {
		writeStatus(w, http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed, "only GET is served")
		return
	}
	path := strings.Trim(r.URL.Path, "/")
	switch path {
	case "healthz", "readyz", "livez":
		w.Write([]byte("ok"))
		return
	}
	parts := strings.Split(path, "/")
	if len(parts) < 3 || parts[0] != "apis" {
		writeStatus(w, http.StatusNotFound, metav1.StatusReasonNotFound, "not found: "+r.URL.Path)
		return
	}
	api := API(parts[1])
	if !slices.Contains(APIs, api) || parts[2] != api.version() {
		writeStatus(w, http.StatusNotFound, metav1.StatusReasonNotFound, "not found: "+r.URL.Path)
		return
	}
	rest := parts[3:]
	if len(rest) == 0 {
		writeJSON(w, s.discovery(api))
		return
	}
	switch api {
	case ResourceMetrics:
		s.serveResource(w, r.URL.Query(), rest)
	case CustomMetrics:
		s.serveCustom(w, r.URL.Query(), rest)
	case ExternalMetrics:
		s.serveExternal(w, r.URL.Query(), rest)
	}
}

func (s *Server) record(r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.requests) == maxRecorded {
		s.requests = slices.Delete(s.requests, 0, maxRecorded/2)
	}
	s.requests = append(s.requests, Request{
		Method: r.Method,
		Path:   r.URL.Path,
		Query:  r.URL.RawQuery,
		User:   r.Header.Get("X-Remote-User"),
		Groups: r.Header.Values("X-Remote-Group"),
	})
}

// isUnavailable reports whether SetUnavailable covers the metric; the caller
// holds s.mu.
func (s *Server) isUnavailable(api API, metric string) bool {
	return s.unavailable[unavailableKey{api, ""}] || s.unavailable[unavailableKey{api, metric}]
}

// discovery returns the APIResourceList of an API. The custom and external
// lists name the metrics that currently have values, as adapters do.
func (s *Server) discovery(api API) *metav1.APIResourceList {
	list := &metav1.APIResourceList{
		TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
		GroupVersion: api.groupVersion(),
		APIResources: []metav1.APIResource{},
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch api {
	case ResourceMetrics:
		list.APIResources = []metav1.APIResource{
			{Name: "nodes", Kind: "NodeMetrics", Namespaced: false, Verbs: []string{"get", "list"}},
			{Name: "pods", Kind: "PodMetrics", Namespaced: true, Verbs: []string{"get", "list"}},
		}
	case CustomMetrics:
		seen := map[string]bool{}
		for k := range s.custom {
			name := k.resource + "/" + k.metric
			if !seen[name] {
				seen[name] = true
				list.APIResources = append(list.APIResources, metav1.APIResource{
					Name: name, Kind: "MetricValueList", Namespaced: k.namespace != "" || k.resource == "namespaces", Verbs: []string{"get"},
				})
			}
		}
	case ExternalMetrics:
		seen := map[string]bool{}
		for k := range s.external {
			if !seen[k.metric] {
				seen[k.metric] = true
				list.APIResources = append(list.APIResources, metav1.APIResource{
					Name: k.metric, Kind: "ExternalMetricValueList", Namespaced: true, Verbs: []string{"get"},
				})
			}
		}
	}
	sort.Slice(list.APIResources, func(i, j int) bool { return list.APIResources[i].Name < list.APIResources[j].Name })
	return list
}

// serveResource serves metrics.k8s.io/v1beta1: pods (all namespaces),
// namespaces/{ns}/pods, namespaces/{ns}/pods/{name}, and nodes, of which the
// server has none.
func (s *Server) serveResource(w http.ResponseWriter, q url.Values, p []string) {
	namespace, name, resourceName := "", "", ""
	switch {
	case len(p) == 1:
		resourceName = p[0]
	case len(p) == 2 && p[0] == "nodes":
		resourceName, name = p[0], p[1]
	case len(p) == 3 && p[0] == "namespaces":
		namespace, resourceName = p[1], p[2]
	case len(p) == 4 && p[0] == "namespaces":
		namespace, resourceName, name = p[1], p[2], p[3]
	}
	if resourceName != "pods" && resourceName != "nodes" {
		writeStatus(w, http.StatusNotFound, metav1.StatusReasonNotFound, "unknown resource")
		return
	}
	selector, err := labels.Parse(q.Get("labelSelector"))
	if err != nil {
		writeStatus(w, http.StatusBadRequest, metav1.StatusReasonBadRequest, err.Error())
		return
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.isUnavailable(ResourceMetrics, resourceName) {
		writeStatus(w, http.StatusServiceUnavailable, metav1.StatusReasonServiceUnavailable, "metrics for "+resourceName+" are unavailable")
		return
	}
	if resourceName == "nodes" {
		if name != "" {
			writeStatus(w, http.StatusNotFound, metav1.StatusReasonNotFound, fmt.Sprintf("nodemetrics %q not found", name))
			return
		}
		writeJSON(w, &metricsv1beta1.NodeMetricsList{
			TypeMeta: metav1.TypeMeta{Kind: "NodeMetricsList", APIVersion: ResourceMetrics.groupVersion()},
			Items:    []metricsv1beta1.NodeMetrics{},
		})
		return
	}
	if name != "" {
		pm, ok := s.pods[objectKey{namespace, name}]
		if !ok {
			writeStatus(w, http.StatusNotFound, metav1.StatusReasonNotFound, fmt.Sprintf("podmetrics.metrics.k8s.io %q not found", name))
			return
		}
		writeJSON(w, s.servedPod(pm))
		return
	}
	list := &metricsv1beta1.PodMetricsList{
		TypeMeta: metav1.TypeMeta{Kind: "PodMetricsList", APIVersion: ResourceMetrics.groupVersion()},
		Items:    []metricsv1beta1.PodMetrics{},
	}
	for k, pm := range s.pods {
		if (namespace == "" || k.namespace == namespace) && selector.Matches(labels.Set(pm.Labels)) {
			list.Items = append(list.Items, *s.servedPod(pm))
		}
	}
	sort.Slice(list.Items, func(i, j int) bool {
		a, b := list.Items[i], list.Items[j]
		return a.Namespace < b.Namespace || a.Namespace == b.Namespace && a.Name < b.Name
	})
	writeJSON(w, list)
}

// servedPod fills in the type, time stamp and window of a stored PodMetrics.
func (s *Server) servedPod(pm metricsv1beta1.PodMetrics) *metricsv1beta1.PodMetrics {
	out := pm.DeepCopy()
	out.TypeMeta = metav1.TypeMeta{Kind: "PodMetrics", APIVersion: ResourceMetrics.groupVersion()}
	if out.Timestamp.IsZero() {
		out.Timestamp = metav1.NewTime(s.opts.Now())
	}
	if out.Window.Duration == 0 {
		out.Window = metav1.Duration{Duration: s.opts.Window}
	}
	return out
}

// serveCustom serves custom.metrics.k8s.io/v1beta2:
//
//	namespaces/{ns}/metrics/{metric}           metric of the namespace
//	namespaces/{ns}/{resource}/{name}/{metric} metric of one object ("*": all matching labelSelector)
//	{resource}/{name}/{metric}                 the same for cluster-scoped objects
func (s *Server) serveCustom(w http.ResponseWriter, q url.Values, p []string) {
	var resourceName, namespace, name, metric string
	switch {
	case len(p) == 4 && p[0] == "namespaces" && p[2] == "metrics":
		resourceName, name, metric = "namespaces", p[1], p[3]
	case len(p) == 5 && p[0] == "namespaces":
		namespace, resourceName, name, metric = p[1], p[2], p[3], p[4]
	case len(p) == 3:
		resourceName, name, metric = p[0], p[1], p[2]
	default:
		writeStatus(w, http.StatusNotFound, metav1.StatusReasonNotFound, "not found")
		return
	}
	selector, err := labels.Parse(q.Get("labelSelector"))
	if err != nil {
		writeStatus(w, http.StatusBadRequest, metav1.StatusReasonBadRequest, err.Error())
		return
	}
	metricSelector, err := labels.Parse(q.Get("metricLabelSelector"))
	if err != nil {
		writeStatus(w, http.StatusBadRequest, metav1.StatusReasonBadRequest, err.Error())
		return
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.isUnavailable(CustomMetrics, metric) {
		writeStatus(w, http.StatusServiceUnavailable, metav1.StatusReasonServiceUnavailable, "custom metric "+metric+" is unavailable")
		return
	}
	list := &custommetricsv1beta2.MetricValueList{
		TypeMeta: metav1.TypeMeta{Kind: "MetricValueList", APIVersion: CustomMetrics.groupVersion()},
		Items:    []custommetricsv1beta2.MetricValue{},
	}
	for k, m := range s.custom {
		if k.resource != resourceName || k.namespace != namespace || k.metric != metric {
			continue
		}
		if name == "*" && !selector.Matches(labels.Set(m.Labels)) || name != "*" && k.name != name {
			continue
		}
		if !metricSelector.Matches(labels.Set(m.MetricLabels)) {
			continue
		}
		list.Items = append(list.Items, s.servedCustom(m))
	}
	if name != "*" && len(list.Items) == 0 {
		writeStatus(w, http.StatusNotFound, metav1.StatusReasonNotFound,
			fmt.Sprintf("the server could not find the metric %s for %s %s", metric, resourceName, name))
		return
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].DescribedObject.Name < list.Items[j].DescribedObject.Name })
	writeJSON(w, list)
}

func (s *Server) servedCustom(m CustomMetric) custommetricsv1beta2.MetricValue {
	ts := m.Timestamp
	if ts.IsZero() {
		ts = s.opts.Now()
	}
	window := int64(s.opts.Window / time.Second)
	var metricSelector *metav1.LabelSelector
	if len(m.MetricLabels) > 0 {
		metricSelector = &metav1.LabelSelector{MatchLabels: m.MetricLabels}
	}
	return custommetricsv1beta2.MetricValue{
		TypeMeta: metav1.TypeMeta{Kind: "MetricValue", APIVersion: CustomMetrics.groupVersion()},
		DescribedObject: corev1.ObjectReference{
			Kind: m.Kind, APIVersion: m.APIVersion, Namespace: m.Namespace, Name: m.Name,
		},
		Metric:        custommetricsv1beta2.MetricIdentifier{Name: m.Metric, Selector: metricSelector},
		Timestamp:     metav1.NewTime(ts),
		WindowSeconds: &window,
		Value:         m.Value,
	}
}

// serveExternal serves external.metrics.k8s.io/v1beta1 at
// namespaces/{ns}/{metric}.
func (s *Server) serveExternal(w http.ResponseWriter, q url.Values, p []string) {
	if len(p) != 3 || p[0] != "namespaces" {
		writeStatus(w, http.StatusNotFound, metav1.StatusReasonNotFound, "not found")
		return
	}
	namespace, metric := p[1], p[2]
	selector, err := labels.Parse(q.Get("labelSelector"))
	if err != nil {
		writeStatus(w, http.StatusBadRequest, metav1.StatusReasonBadRequest, err.Error())
		return
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.isUnavailable(ExternalMetrics, metric) {
		writeStatus(w, http.StatusServiceUnavailable, metav1.StatusReasonServiceUnavailable, "external metric "+metric+" is unavailable")
		return
	}
	list := &externalmetricsv1beta1.ExternalMetricValueList{
		TypeMeta: metav1.TypeMeta{Kind: "ExternalMetricValueList", APIVersion: ExternalMetrics.groupVersion()},
		Items:    []externalmetricsv1beta1.ExternalMetricValue{},
	}
	window := int64(s.opts.Window / time.Second)
	for k, m := range s.external {
		if k.namespace != namespace || k.metric != metric || !selector.Matches(labels.Set(m.Labels)) {
			continue
		}
		ts := m.Timestamp
		if ts.IsZero() {
			ts = s.opts.Now()
		}
		list.Items = append(list.Items, externalmetricsv1beta1.ExternalMetricValue{
			TypeMeta:      metav1.TypeMeta{Kind: "ExternalMetricValue", APIVersion: ExternalMetrics.groupVersion()},
			MetricName:    m.Metric,
			MetricLabels:  m.Labels,
			Timestamp:     metav1.NewTime(ts),
			WindowSeconds: &window,
			Value:         m.Value,
		})
	}
	sort.Slice(list.Items, func(i, j int) bool {
		return labels.Set(list.Items[i].MetricLabels).String() < labels.Set(list.Items[j].MetricLabels).String()
	})
	writeJSON(w, list)
}

func writeJSON(w http.ResponseWriter, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		writeStatus(w, http.StatusInternalServerError, metav1.StatusReasonInternalError, err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(data)
}

// writeStatus answers with a metav1.Status, which client-go turns into an
// error that apierrors can classify.
func writeStatus(w http.ResponseWriter, code int, reason metav1.StatusReason, message string) {
	data, _ := json.Marshal(&metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure,
		Message:  "metricsserver: " + message,
		Reason:   reason,
		Code:     int32(code),
	})
	w.Header().Set("Content-Type", "application/json")
	// No Retry-After on 503: client-go would retry silently, and a test
	// wants the failure to reach the code under test.
	w.WriteHeader(code)
	w.Write(data)
}

// PodMetrics returns the PodMetrics set for namespace/name, as set (no
// defaults filled in), and whether there is one.
func (s *Server) PodMetrics(namespace, name string) (metricsv1beta1.PodMetrics, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	pm, ok := s.pods[objectKey{namespace, name}]
	return *pm.DeepCopy(), ok
}
