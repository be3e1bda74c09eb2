package admission

import (
	"testing"

	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"github.com/setpointhq/setpoint/server/auth"
	"google.golang.org/grpc"
)

// Every method of the guarded services has an explicit policy, so a new
// RPC cannot be served without one being chosen (unlisted methods are
// admin-only, by default).
func TestEveryMethodHasAPolicy(t *testing.T) {
	for _, sd := range []grpc.ServiceDesc{setpointv1.AutoscalerService_ServiceDesc, setpointv1.AdminService_ServiceDesc} {
		var names []string
		for _, m := range sd.Methods {
			names = append(names, m.MethodName)
		}
		for _, s := range sd.Streams {
			names = append(names, s.StreamName)
		}
		for _, n := range names {
			if _, ok := methodAccess["/"+sd.ServiceName+"/"+n]; !ok {
				t.Errorf("%s/%s has no entry in methodAccess", sd.ServiceName, n)
			}
		}
	}
}

func TestAllowed(t *testing.T) {
	agent := auth.Principal{Name: "agent", Role: auth.ClusterRole("a")}
	platform := auth.Principal{Name: "platform", Role: auth.RolePlatform, Clusters: []string{"a"}}
	admin := auth.Principal{Name: "admin", Role: auth.RoleAdmin}
	key := func(cluster string) *setpointv1.TargetKey {
		return &setpointv1.TargetKey{Cluster: cluster, Namespace: "ns", Name: "n"}
	}
	tests := []struct {
		name   string
		p      auth.Principal
		method string
		req    any
		want   bool
	}{
		{"agent backup", agent, setpointv1.AdminService_Backup_FullMethodName, &setpointv1.BackupRequest{}, false},
		{"platform backup", platform, setpointv1.AdminService_Backup_FullMethodName, &setpointv1.BackupRequest{}, false},
		{"admin backup", admin, setpointv1.AdminService_Backup_FullMethodName, &setpointv1.BackupRequest{}, true},
		{"unknown method", agent, "/setpoint.v1.AutoscalerService/Future", &setpointv1.GetTargetRequest{Target: key("a")}, false},
		{"request of another type", agent, setpointv1.AutoscalerService_ListTargets_FullMethodName, &setpointv1.GetTargetRequest{Target: key("a")}, false},
		{"recommend without target", agent, setpointv1.AutoscalerService_Recommend_FullMethodName, &setpointv1.RecommendRequest{}, false},
		{"delete own", agent, setpointv1.AutoscalerService_DeleteTarget_FullMethodName, &setpointv1.DeleteTargetRequest{Target: key("a")}, true},
		{"platform simulate unseeded", platform, setpointv1.AutoscalerService_Simulate_FullMethodName, &setpointv1.SimulateRequest{}, true},
		{"platform simulate seeded elsewhere", platform, setpointv1.AutoscalerService_Simulate_FullMethodName, &setpointv1.SimulateRequest{SeedFrom: key("b")}, false},
		{"platform decisions own", platform, setpointv1.AutoscalerService_ListDecisions_FullMethodName, &setpointv1.ListDecisionsRequest{Target: key("a")}, true},
		{"agent decisions elsewhere", agent, setpointv1.AutoscalerService_ListDecisions_FullMethodName, &setpointv1.ListDecisionsRequest{Target: key("b")}, false},
		{"platform watch all", platform, setpointv1.AutoscalerService_Watch_FullMethodName, &setpointv1.WatchRequest{}, true},
		{"platform watch elsewhere", platform, setpointv1.AutoscalerService_Watch_FullMethodName, &setpointv1.WatchRequest{Cluster: "b"}, false},
	}
	for _, tt := range tests {
		if got := allowed(tt.p, tt.method, tt.req); got != tt.want {
			t.Errorf("%s: allowed = %v, want %v", tt.name, got, tt.want)
		}
	}
}
