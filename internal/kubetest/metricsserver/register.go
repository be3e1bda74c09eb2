package metricsserver

import (
	"context"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/setpointhq/setpoint/internal/testkit"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/setpointhq/setpoint/internal/kubetest"
)

// apiServices is the resource of APIService objects. The dynamic client
// keeps k8s.io/kube-aggregator out of the module's dependencies.
var apiServices = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}

// DefaultRegisterTimeout bounds Register when ctx has no deadline.
const DefaultRegisterTimeout = 60 * time.Second

// APIServiceName returns the name of the APIService Register creates for api,
// "<version>.<group>".
func APIServiceName(api API) string { return api.version() + "." + string(api) }

// Register makes the cluster behind cfg (an identity allowed to create
// Services and APIServices) route the three metrics APIs to s, and waits
// until every APIService is Available and the groups appear in discovery.
//
// The Service is of type ExternalName with externalName "127.0.0.1". The
// aggregation layer's default routing (without --enable-aggregator-routing)
// sends requests to an ExternalName Service's name and the APIService's
// port, so it reaches a server on loopback; endpoint routing cannot, because
// EndpointSlices reject loopback addresses. The APIServices carry the
// server's CA bundle; the apiserver checks the certificate against the
// Service's DNS name, which the serving certificate includes.
//
// Register is idempotent: it updates objects that already exist.
func (s *Server) Register(ctx context.Context, cfg *rest.Config) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultRegisterTimeout)
		defer cancel()
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("metricsserver: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("metricsserver: %w", err)
	}
	if err := s.applyService(ctx, client); err != nil {
		return err
	}
	for _, api := range APIs {
		if err := s.applyAPIService(ctx, dyn, api); err != nil {
			return err
		}
	}
	return s.waitRegistered(ctx, client, dyn)
}

// Unregister deletes the APIServices and the Service that Register created,
// after which the metrics APIs answer 404 through the apiserver.
func (s *Server) Unregister(ctx context.Context, cfg *rest.Config) error {
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("metricsserver: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("metricsserver: %w", err)
	}
	var errs []error
	for _, api := range APIs {
		err := dyn.Resource(apiServices).Delete(ctx, APIServiceName(api), metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	err = client.CoreV1().Services(s.opts.ServiceNamespace).Delete(ctx, s.opts.ServiceName, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("metricsserver: unregister: %w", err)
	}
	return nil
}

func (s *Server) applyService(ctx context.Context, client kubernetes.Interface) error {
	services := client.CoreV1().Services(s.opts.ServiceNamespace)
	want := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.opts.ServiceNamespace, Name: s.opts.ServiceName},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "127.0.0.1"},
	}
	_, err := services.Create(ctx, want, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		var got *corev1.Service
		if got, err = services.Get(ctx, want.Name, metav1.GetOptions{}); err == nil {
			got.Spec = want.Spec
			_, err = services.Update(ctx, got, metav1.UpdateOptions{})
		}
	}
	if err != nil {
		return fmt.Errorf("metricsserver: service %s/%s: %w", want.Namespace, want.Name, err)
	}
	return nil
}

func (s *Server) applyAPIService(ctx context.Context, dyn dynamic.Interface, api API) error {
	name := APIServiceName(api)
	spec := map[string]any{
		"group":   string(api),
		"version": api.version(),
		"service": map[string]any{
			"namespace": s.opts.ServiceNamespace,
			"name":      s.opts.ServiceName,
			"port":      int64(s.Port()),
		},
		"caBundle":             base64.StdEncoding.EncodeToString(s.caPEM),
		"groupPriorityMinimum": int64(100),
		"versionPriority":      int64(100),
	}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1",
		"kind":       "APIService",
		"metadata":   map[string]any{"name": name},
		"spec":       spec,
	}}
	client := dyn.Resource(apiServices)
	_, err := client.Create(ctx, obj, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		var got *unstructured.Unstructured
		if got, err = client.Get(ctx, name, metav1.GetOptions{}); err == nil {
			got.Object["spec"] = spec
			_, err = client.Update(ctx, got, metav1.UpdateOptions{})
		}
	}
	if err != nil {
		return fmt.Errorf("metricsserver: apiservice %s: %w", name, err)
	}
	return nil
}

// waitRegistered polls until every APIService reports Available=True and
// the apiserver's discovery lists every group.
func (s *Server) waitRegistered(ctx context.Context, client kubernetes.Interface, dyn dynamic.Interface) error {
	if err := testkit.Poll(ctx, 0, func() error { return s.registered(ctx, client, dyn) }); err != nil {
		return fmt.Errorf("metricsserver: not available: %w", err)
	}
	return nil
}

func (s *Server) registered(ctx context.Context, client kubernetes.Interface, dyn dynamic.Interface) error {
	for _, api := range APIs {
		obj, err := dyn.Resource(apiServices).Get(ctx, APIServiceName(api), metav1.GetOptions{})
		if err != nil {
			return err
		}
		conditions, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
		available := false
		for _, c := range conditions {
			c, _ := c.(map[string]any)
			if c["type"] == "Available" {
				if c["status"] == "True" {
					available = true
					break
				}
				return fmt.Errorf("apiservice %s: Available=%v: %v: %v", obj.GetName(), c["status"], c["reason"], c["message"])
			}
		}
		if !available {
			return fmt.Errorf("apiservice %s: no Available condition yet", obj.GetName())
		}
	}
	// Clients build RESTMappers from the apiserver's aggregated discovery,
	// which the aggregator fills in asynchronously from each server's
	// discovery document; wait until it lists every group without failure.
	_, lists, err := client.Discovery().ServerGroupsAndResources()
	if err != nil {
		failed, ok := err.(*discovery.ErrGroupDiscoveryFailed)
		if !ok {
			return err
		}
		for gv, gvErr := range failed.Groups {
			if slices.Contains(APIs, API(gv.Group)) {
				return fmt.Errorf("discovery of %s: %w", gv, gvErr)
			}
		}
	}
	for _, api := range APIs {
		if !slices.ContainsFunc(lists, func(l *metav1.APIResourceList) bool { return l.GroupVersion == api.groupVersion() }) {
			return fmt.Errorf("%s not in discovery yet", api.groupVersion())
		}
	}
	return nil
}

func certPool(pemData []byte) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemData) {
		return nil, errors.New("metricsserver: ClientCA holds no PEM certificate")
	}
	return pool, nil
}

// StartRegistered starts a server that trusts the front-proxy CA of every
// cluster given (as a real aggregated API server trusts its cluster's) and
// registers it with each as its admin, so that several clusters read the
// same metrics; the caller closes it.
func StartRegistered(ctx context.Context, clusters ...*kubetest.Cluster) (*Server, error) {
	if len(clusters) == 0 {
		return nil, errors.New("metricsserver: StartRegistered needs a cluster")
	}
	var bundle []byte
	for _, c := range clusters {
		bundle = append(bundle, c.FrontProxyCAPEM()...)
	}
	s, err := Start(Options{ClientCA: bundle})
	if err != nil {
		return nil, err
	}
	for _, c := range clusters {
		if err := s.Register(ctx, c.Config()); err != nil {
			s.Close()
			return nil, err
		}
	}
	return s, nil
}
