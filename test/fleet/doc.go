// Package fleet tests Setpoint as it is deployed: several Kubernetes
// clusters, each with its own setpoint-agent and its own mTLS identity,
// sharing one highly available service, with workloads whose pods really
// start, turn Ready and take load (internal/twin).
//
// TestFleet runs three cluster twins (a, b, c: API servers on one shared
// etcd under distinct prefixes, the workload controllers, kube-scheduler,
// kwok nodes, closed-loop load models) and three setpoint-server processes
// on a three-member etcd, configured with deploy-ha's flags, mutual TLS and
// the principals file `setpointctl certs` writes; each cluster's
// setpoint-agent process runs with deploy-ha's agent flags and the
// certificate of cluster:<name>. Each cluster's load trace drives a
// Deployment up and back down through its Autoscaler. It asserts that
//
//   - scale writes become pods that start and turn Ready, and the CPU per
//     Ready pod falls back under the target; the replica count follows the
//     load up and down and holds while the load holds (settleCheck);
//   - a rolling update of cluster a's Deployment during its scale-up
//     completes, at the scaled count;
//   - with a server SIGKILLed and then the Setpoint etcd's leader killed
//     mid-run, no cluster goes longer than maxDecisionGap without a
//     decision, and every decision the platform saw on Watch, and every
//     replica count an agent wrote, is in the decision log afterwards;
//   - an agent's identity cannot read or act on another cluster's targets
//     (PermissionDenied on GetTarget, ListTargets, Recommend, DeleteTarget,
//     Watch, the web console's JSON API), and the platform identity sees
//     all three (ListTargets, Watch, the console).
//
// TestFleets runs the same three twins, service and agents as one fleet:
// the platform identity puts a fleet (FleetService.PutFleet) over the
// Deployment shop/web of a, b and c, equal weights, one pod per period of
// scale-down; each cluster's Autoscaler names the fleet and nothing else.
// The load moves between the clusters in phases whose sum never falls
// (Load.SetTrace), and the test asserts that
//
//   - load that moves from a and c to b moves no replica (the fleet pools
//     the members' pods), and a rise in b is split by weight, every share
//     run as Ready pods and shown in the member's Autoscaler status;
//   - with c's agent stopped (its traffic moved to a, its Deployment down
//     to one replica), the service leaves c out and a and b run the whole
//     total within the documented failover bound, StaleAfter + 2 × sync
//     period from the agent's stop;
//   - restarted, c returns paced: the first split that pools it again holds
//     a and b one pod below their shares and returns c below its weighted
//     share, a and b fall no further within the scale-down period, and the
//     fleet ends at the weighted split;
//   - the fleet's total changes only by a decision that rescales or by a
//     member leaving or joining the pool (checkTotals);
//   - cluster a's identity may read its own fleet and nothing else: Report
//     as b, Report to or read a fleet without a, PutFleet and DeleteFleet
//     are PERMISSION_DENIED, whether or not the fleet exists, and change
//     nothing.
//
// TestClosedLoopDifferential drives two twins with the same trace: one
// whose kube-controller-manager HPA controller scales the Deployment, one
// where a setpoint-agent in native HPA mode does, and compares the replica
// trajectories, conditions and Events (differential.go has the tolerance).
// It runs the five traces of twin (steady, ramp, spike, diurnal, flapping)
// and shows the comparison fails when Setpoint decides differently.
//
// The tests skip, outside CI, when the kube binaries are not built (make
// kube-binaries); SETPOINT_FLEET_SKIP skips them always. `make fleet` runs
// them; `make fleet-long` runs them with the controller's default windows
// (SETPOINT_FLEET_LONG=1). docs/fleet-twin.md has the figures.
package fleet
