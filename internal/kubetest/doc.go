// Package kubetest runs a real kube-apiserver and etcd on loopback for the
// agent's end-to-end tests.
//
// # Using it
//
//	func TestSomething(t *testing.T) {
//		c := kubetest.StartT(t, kubetest.Options{})
//		client := c.Client()             // admin (system:masters)
//		cfg, _ := c.UserConfig("alice")  // no rights until a RoleBinding grants them
//		...
//	}
//
// Each cluster is fresh: new certificate authorities, an empty etcd in a
// temporary directory, and ports chosen at start. Starting one takes a few
// seconds; tests that can share a cluster should start it once (in TestMain
// or a parent test).
//
// # Binaries
//
// The binaries (kube-apiserver, kube-controller-manager, kube-scheduler,
// etcd, kwok) are built from the versions pinned in tools/kube/go.mod (kwok:
// the version hack/kube-binaries.sh names) by hack/kube-binaries.sh, into
// $SETPOINT_CACHE (default ~/.cache/setpoint) under a directory keyed by
// tools/kube/go.sum. Start runs the script, which returns at once when the
// build exists and takes several minutes when it does not; run it ahead of
// time (CI: as a cached step) so that go test stays within its default
// timeout. $SETPOINT_KUBE_BIN_DIR or Options.BinDir point at prebuilt
// binaries instead; BinariesBuilt says whether a build exists without
// starting one.
//
// # What runs, and what does not
//
// Only etcd and the kube-apiserver run unless a test asks for more:
// StartControllerManager runs kube-controller-manager (by default with only
// its HPA controller, for the differential tests in test/differential),
// StartScheduler kube-scheduler, and StartKwok kwok, which simulates nodes
// and pod lifecycles; internal/twin runs all of them as a cluster twin.
// Options.EtcdURL starts an apiserver on another cluster's etcd, under its
// own Options.EtcdPrefix. No kubelet ever runs. Without kwok, a Deployment
// never gets Pods that run, namespaces are never finalized after deletion
// unless the namespace controller runs, and Pod status changes only when a
// test writes it (UpdateStatus). The ServiceAccount admission plugin is
// off, because nothing would create the "default" ServiceAccount it
// requires, and the "kubernetes" Service has no endpoints.
//
// The apiserver authorizes with RBAC. Config is a client certificate in
// system:masters; UserConfig and ServiceAccountConfig give identities with
// no rights, for testing the roles the agent needs. The aggregation layer is
// configured (front-proxy CA, proxy client certificate), so an APIService can
// route a group to a server on 127.0.0.1 through an ExternalName Service; the
// metricsserver subpackage does this for the metrics APIs.
//
// # Processes
//
// Both servers run in their own process groups with their output in
// etcd.log and kube-apiserver.log under Dir. Stop kills them and removes the
// directory; on Linux the kernel also kills them if the test binary dies
// without calling Stop.
package kubetest
