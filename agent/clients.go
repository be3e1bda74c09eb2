package agent

import (
	"fmt"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/scale"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"
	"k8s.io/metrics/pkg/client/custom_metrics"
	"k8s.io/metrics/pkg/client/external_metrics"
)

// KubeClients are the Kubernetes clients a Controller uses, built from one
// rest.Config.
type KubeClients struct {
	// Kube is the typed client.
	Kube kubernetes.Interface
	// Dynamic is the dynamic client.
	Dynamic dynamic.Interface
	// Scales reads and writes Scale subresources of any scalable kind.
	Scales scale.ScalesGetter
	// Mapper is a deferred, cached discovery RESTMapper.
	Mapper *restmapper.DeferredDiscoveryRESTMapper
	// Metrics are the metrics API clients.
	Metrics MetricsClients

	customAPIs custom_metrics.AvailableAPIsGetter
}

// NewKubeClients builds the clients from cfg.
func NewKubeClients(cfg *rest.Config) (*KubeClients, error) {
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("agent: kubernetes client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("agent: dynamic client: %w", err)
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("agent: discovery client: %w", err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc))
	scales, err := scale.NewForConfig(cfg, mapper, dynamic.LegacyAPIPathResolverFunc, scale.NewDiscoveryScaleKindResolver(disc))
	if err != nil {
		return nil, fmt.Errorf("agent: scale client: %w", err)
	}
	resourceMetrics, err := metricsclient.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("agent: resource metrics client: %w", err)
	}
	external, err := external_metrics.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("agent: external metrics client: %w", err)
	}
	apis := custom_metrics.NewAvailableAPIsGetter(disc)
	return &KubeClients{
		Kube:    kube,
		Dynamic: dyn,
		Scales:  scales,
		Mapper:  mapper,
		Metrics: MetricsClients{
			Resource: resourceMetrics,
			Custom:   custom_metrics.NewForConfig(cfg, mapper, apis),
			External: external,
		},
		customAPIs: apis,
	}, nil
}

// Invalidate drops the cached discovery: the REST mappings and the custom
// metrics API's version, so new kinds and API registrations are seen.
func (k *KubeClients) Invalidate() {
	k.Mapper.Reset()
	k.customAPIs.Invalidate()
}

// Options returns controller options with the clients filled in.
func (k *KubeClients) Options() Options {
	return Options{
		Kube:       k.Kube,
		Dynamic:    k.Dynamic,
		Scales:     k.Scales,
		Mapper:     k.Mapper,
		Metrics:    k.Metrics,
		Invalidate: k.Invalidate,
	}
}
