package fleets_test

import (
	"os"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/setpointhq/setpoint/internal/etcdtest"
	"github.com/setpointhq/setpoint/internal/kubetest"
	"github.com/setpointhq/setpoint/internal/testkit"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"github.com/setpointhq/setpoint/store/etcdstore"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/protobuf/testing/protocmp"
)

// TestTwoServersOneFleet: two servers share one etcd store. Members report
// to different servers, and the fleet decides over both reports on
// whichever server the deciding report reaches: the reports live in the
// fleet's record, not in a server's memory.
func TestTwoServersOneFleet(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd")
	}
	if !kubetest.BinariesBuilt(t.Context()) && os.Getenv("CI") != "true" {
		t.Skip("the etcd binary is not built (make kube-binaries builds it once, into ~/.cache/setpoint)")
	}
	cluster := etcdtest.Start(t, 1)
	clock := testkit.NewClock(t0)
	var servers []*env
	for range 2 {
		cli, err := clientv3.New(clientv3.Config{Endpoints: cluster.Endpoints, Logger: zap.NewNop()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cli.Close() })
		st, err := etcdstore.New(t.Context(), cli, etcdstore.Options{Prefix: "/fleets/"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		servers = append(servers, startOn(t, st, clock, nil))
	}
	one, two := servers[0], servers[1]
	one.put(t, fleetSpec("a", "b"))
	a, b := member{"a", 2, 450}, member{"b", 2, 150}
	if r := one.report(t, a); !r.GetDecided() {
		t.Fatal("the first report did not decide")
	}
	clock.Step(time.Second)
	two.report(t, b)
	clock.Step(syncPeriod)
	r := two.report(t, a)
	if !r.GetDecided() {
		t.Fatal("a report a sync period later did not decide")
	}
	if got := r.GetDecision().GetStatus().GetCurrentReplicas(); got != 4 {
		t.Errorf("the decision pooled %d replicas, want 4 (a's 2 reported to one server, b's 2 to the other)", got)
	}
	// 900m + 300m over 2000m requested: 60% against 50%, 4 × 1.2 = 4.8 → 5.
	if got := r.GetTotal(); got != 5 {
		t.Errorf("total %d, want 5", got)
	}
	f1, err := one.fleets(t, "ops").GetFleet(t.Context(), &setpointv1.GetFleetRequest{Fleet: fleetKey})
	if err != nil {
		t.Fatal(err)
	}
	f2, err := two.fleets(t, "ops").GetFleet(t.Context(), &setpointv1.GetFleetRequest{Fleet: fleetKey})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(f1, f2, protocmp.Transform()); d != "" {
		t.Errorf("the servers answer different fleets (-one +two):\n%s", d)
	}
}
