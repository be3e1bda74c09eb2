package metricsserver_test

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/setpointhq/setpoint/internal/kubetest/metricsserver"
)

// TestRoutes checks the paths the k8s.io/metrics clients request, against
// the server directly; kubetest's smoke test covers the way through the
// kube-apiserver's aggregation layer.
func TestRoutes(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	s := metricsserver.StartT(t, metricsserver.Options{Now: func() time.Time { return now }})
	web := map[string]string{"app": "web"}
	s.SetPodUsage("ns", "web-0", web, corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")})
	s.SetPodUsage("ns", "web-1", web, corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m")})
	s.SetPodUsage("other", "db-0", map[string]string{"app": "db"}, corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")})
	for _, pod := range []string{"web-0", "web-1"} {
		s.SetCustomMetric(metricsserver.CustomMetric{Resource: "pods", Namespace: "ns", Name: pod, Labels: web, Metric: "rps", Value: resource.MustParse("10")})
	}
	s.SetCustomMetric(metricsserver.CustomMetric{Resource: "deployments.apps", Namespace: "ns", Name: "web", Metric: "queue", Value: resource.MustParse("3")})
	s.SetCustomMetric(metricsserver.CustomMetric{Resource: "namespaces", Name: "ns", Metric: "load", Value: resource.MustParse("2")})
	s.SetCustomMetric(metricsserver.CustomMetric{Resource: "nodes", Name: "node-a", Metric: "temp", Value: resource.MustParse("40")})
	s.SetExternalMetric(metricsserver.ExternalMetric{Namespace: "ns", Metric: "ready", Labels: map[string]string{"queue": "a"}, Value: resource.MustParse("5")})
	s.SetExternalMetric(metricsserver.ExternalMetric{Namespace: "ns", Metric: "ready", Labels: map[string]string{"queue": "b"}, Value: resource.MustParse("6")})
	s.SetExternalMetric(metricsserver.ExternalMetric{Namespace: "ns", Metric: "broken", Value: resource.MustParse("1")})
	s.SetUnavailable(metricsserver.ExternalMetrics, "broken", true)

	tests := []struct {
		name      string
		path      string
		wantCode  int
		wantKind  string
		wantItems int // -1: not a list
	}{
		{"resource discovery", "/apis/metrics.k8s.io/v1beta1", 200, "APIResourceList", -1},
		{"custom discovery", "/apis/custom.metrics.k8s.io/v1beta2", 200, "APIResourceList", -1},
		{"external discovery", "/apis/external.metrics.k8s.io/v1beta1", 200, "APIResourceList", -1},
		{"aggregated discovery is not served", "/apis", 404, "Status", -1},
		{"unserved version", "/apis/custom.metrics.k8s.io/v1beta1", 404, "Status", -1},
		{"pod metrics by name", "/apis/metrics.k8s.io/v1beta1/namespaces/ns/pods/web-0", 200, "PodMetrics", -1},
		{"pod metrics missing", "/apis/metrics.k8s.io/v1beta1/namespaces/ns/pods/nope", 404, "Status", -1},
		{"pod metrics in namespace", "/apis/metrics.k8s.io/v1beta1/namespaces/ns/pods", 200, "PodMetricsList", 2},
		{"pod metrics by selector", "/apis/metrics.k8s.io/v1beta1/namespaces/ns/pods?labelSelector=app%3Dweb", 200, "PodMetricsList", 2},
		{"pod metrics selector matching none", "/apis/metrics.k8s.io/v1beta1/namespaces/ns/pods?labelSelector=app%3Ddb", 200, "PodMetricsList", 0},
		{"pod metrics in all namespaces", "/apis/metrics.k8s.io/v1beta1/pods", 200, "PodMetricsList", 3},
		{"bad selector", "/apis/metrics.k8s.io/v1beta1/pods?labelSelector=%3D%3D%3D", 400, "Status", -1},
		{"node metrics", "/apis/metrics.k8s.io/v1beta1/nodes", 200, "NodeMetricsList", 0},
		{"custom pods by selector", "/apis/custom.metrics.k8s.io/v1beta2/namespaces/ns/pods/*/rps?labelSelector=app%3Dweb", 200, "MetricValueList", 2},
		{"custom one pod", "/apis/custom.metrics.k8s.io/v1beta2/namespaces/ns/pods/web-1/rps", 200, "MetricValueList", 1},
		{"custom object", "/apis/custom.metrics.k8s.io/v1beta2/namespaces/ns/deployments.apps/web/queue", 200, "MetricValueList", 1},
		{"custom object missing", "/apis/custom.metrics.k8s.io/v1beta2/namespaces/ns/deployments.apps/web/nope", 404, "Status", -1},
		{"custom namespace metric", "/apis/custom.metrics.k8s.io/v1beta2/namespaces/ns/metrics/load", 200, "MetricValueList", 1},
		{"custom cluster-scoped object", "/apis/custom.metrics.k8s.io/v1beta2/nodes/node-a/temp", 200, "MetricValueList", 1},
		{"external by selector", "/apis/external.metrics.k8s.io/v1beta1/namespaces/ns/ready?labelSelector=queue%3Da", 200, "ExternalMetricValueList", 1},
		{"external all series", "/apis/external.metrics.k8s.io/v1beta1/namespaces/ns/ready", 200, "ExternalMetricValueList", 2},
		{"external unavailable", "/apis/external.metrics.k8s.io/v1beta1/namespaces/ns/broken", 503, "Status", -1},
	}
	client := httpsClient(t, s.CAPEM())
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := client.Get(s.URL() + tt.path)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			var got struct {
				Kind  string            `json:"kind"`
				Items []json.RawMessage `json:"items"`
			}
			if err := json.Unmarshal(body, &got); err != nil {
				t.Fatalf("decode %s: %v", body, err)
			}
			if resp.StatusCode != tt.wantCode || got.Kind != tt.wantKind {
				t.Errorf("GET %s = %d %s, want %d %s\n%s", tt.path, resp.StatusCode, got.Kind, tt.wantCode, tt.wantKind, body)
			}
			if tt.wantItems >= 0 && len(got.Items) != tt.wantItems {
				t.Errorf("GET %s = %d items, want %d\n%s", tt.path, len(got.Items), tt.wantItems, body)
			}
		})
	}
}

// TestClientCA checks that with Options.ClientCA the server turns away
// clients without a certificate, as the real aggregated servers do.
func TestClientCA(t *testing.T) {
	other := metricsserver.StartT(t, metricsserver.Options{})
	s := metricsserver.StartT(t, metricsserver.Options{ClientCA: other.CAPEM()})
	resp, err := httpsClient(t, s.CAPEM()).Get(s.URL() + "/apis/metrics.k8s.io/v1beta1")
	if err == nil {
		resp.Body.Close()
		t.Fatalf("request without a client certificate: status %d, want a TLS error", resp.StatusCode)
	}
}

func httpsClient(t *testing.T, caPEM []byte) *http.Client {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		t.Fatal("no CA certificate")
	}
	transport := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}
	t.Cleanup(transport.CloseIdleConnections)
	return &http.Client{Transport: transport, Timeout: 10 * time.Second}
}
