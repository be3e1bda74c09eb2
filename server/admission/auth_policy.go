package admission

import (
	"context"
	"log/slog"
	"strings"
	"sync"

	consolev1 "github.com/setpointhq/setpoint/proto/setpoint/console/v1"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"github.com/setpointhq/setpoint/server/auth"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// access is what a method needs of the caller's principal, checked against
// the target named inside the request.
type access int

// The kinds of access. The zero value, accessAdmin, is what a method
// missing from methodAccess needs: unknown methods are denied by default.
const (
	// accessAdmin: the admin role.
	accessAdmin access = iota
	// accessWrite: write access to the request target's cluster.
	accessWrite
	// accessRead: read access to the request target's cluster.
	accessRead
	// accessList: read access to the request's cluster ("": every one).
	accessList
	// accessSimulate: any principal; read access to seed_from's cluster
	// when set.
	accessSimulate
	// accessWatch: any principal; read access to the request's cluster
	// when set (the handler filters the rest with CanRead).
	accessWatch
	// accessAny: any principal.
	accessAny
	// accessFleetManage: an admin or a platform principal; the handler
	// checks that a platform principal may read every member cluster of
	// the fleet (package fleets).
	accessFleetManage
	// accessFleetRead: any principal; the handler checks that it may
	// manage the fleet or is the agent of a member cluster.
	accessFleetRead
	// accessFleetReport: the agent of the report's member cluster (an
	// admin for any member); the handler checks that the cluster is a
	// member of the fleet.
	accessFleetReport
)

// methodAccess is the authorization policy: what each method needs.
var methodAccess = map[string]access{
	setpointv1.AutoscalerService_Recommend_FullMethodName:     accessWrite,
	setpointv1.AutoscalerService_Observe_FullMethodName:       accessWrite,
	setpointv1.AutoscalerService_DeleteTarget_FullMethodName:  accessWrite,
	setpointv1.AutoscalerService_GetTarget_FullMethodName:     accessRead,
	setpointv1.AutoscalerService_ListDecisions_FullMethodName: accessRead,
	setpointv1.AutoscalerService_ListTargets_FullMethodName:   accessList,
	setpointv1.AutoscalerService_Simulate_FullMethodName:      accessSimulate,
	setpointv1.AutoscalerService_Watch_FullMethodName:         accessWatch,
	setpointv1.AdminService_Backup_FullMethodName:             accessAdmin,
	setpointv1.FleetService_PutFleet_FullMethodName:           accessFleetManage,
	setpointv1.FleetService_DeleteFleet_FullMethodName:        accessFleetManage,
	setpointv1.FleetService_GetFleet_FullMethodName:           accessFleetRead,
	setpointv1.FleetService_ListFleets_FullMethodName:         accessFleetRead,
	setpointv1.FleetService_SimulateFleet_FullMethodName:      accessFleetRead,
	setpointv1.FleetService_Report_FullMethodName:             accessFleetReport,
	consolev1.SessionService_Who_FullMethodName:               accessAny,
	consolev1.ReplayService_Replay_FullMethodName:             accessRead,
}

// allowed reports whether p may call method with req. A request of an
// unexpected type is denied.
func allowed(p auth.Principal, method string, req any) bool {
	if p.Role == auth.RoleAdmin {
		return true
	}
	switch methodAccess[method] {
	case accessWrite:
		r, ok := req.(interface{ GetTarget() *setpointv1.TargetKey })
		return ok && p.CanWrite(r.GetTarget().GetCluster())
	case accessRead:
		r, ok := req.(interface{ GetTarget() *setpointv1.TargetKey })
		return ok && p.CanRead(r.GetTarget().GetCluster())
	case accessList:
		r, ok := req.(*setpointv1.ListTargetsRequest)
		return ok && p.CanRead(r.GetCluster())
	case accessSimulate:
		r, ok := req.(*setpointv1.SimulateRequest)
		return ok && (r.GetSeedFrom() == nil || p.CanRead(r.GetSeedFrom().GetCluster()))
	case accessWatch:
		r, ok := req.(*setpointv1.WatchRequest)
		return ok && (r.GetCluster() == "" || p.CanRead(r.GetCluster()))
	case accessAny, accessFleetRead:
		return true
	case accessFleetManage:
		return p.Role == auth.RolePlatform
	case accessFleetReport:
		r, ok := req.(*setpointv1.ReportRequest)
		own, isCluster := p.Role.Cluster()
		return ok && isCluster && r.GetReport().GetMember() == own
	default:
		return false
	}
}

// fleetCluster names the fleets in the audit log: the reserved cluster
// their records are kept under (package fleets).
const fleetCluster = "@fleet"

// ErrPermissionDenied is the one answer to a call the principal may not
// make. It names nothing, so it cannot tell whether another tenant's
// target exists.
var ErrPermissionDenied = status.Error(codes.PermissionDenied, "permission denied")

// guard authenticates and authorizes the calls of the guarded services,
// and writes the audit log.
type guard struct {
	auth  *auth.Authenticator // nil: no authentication nor authorization
	rates *rateLimiter        // nil: no rate limit (applied by the tap handle)
	audit auditor
}

// authenticate is the auth.AuthFunc of the chain: the principal the tap
// handle found (tap.go), else authentication now.
func (g *guard) authenticate(ctx context.Context) (context.Context, error) {
	if _, ok := auth.PrincipalFrom(ctx); ok {
		return ctx, nil
	}
	p, presented, err := g.auth.Authenticate(ctx)
	if err != nil {
		if presented == "" {
			presented = "no credentials"
		}
		target, _ := ctx.Value(targetKey{}).(string)
		g.audit.denied(ctx, "", presented, target, codes.Unauthenticated)
		return nil, err
	}
	return auth.WithPrincipal(ctx, p), nil
}

// targetKey is the context key of the request's target, for the audit of
// an unauthenticated unary call (a stream's request is not received yet).
type targetKey struct{}

// withTarget runs next with the request's target in the context.
func withTarget(next grpc.UnaryServerInterceptor) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		return next(context.WithValue(ctx, targetKey{}, describeTarget(req)), req, info, handler)
	}
}

// authorize checks the request against the principal of ctx.
func (g *guard) authorize(ctx context.Context, method string, req any) error {
	p, ok := auth.PrincipalFrom(ctx)
	if !ok {
		return auth.ErrUnauthenticated
	}
	if allowed(p, method, req) {
		return nil
	}
	g.audit.denied(ctx, p.Name, "role "+string(p.Role), describeTarget(req), codes.PermissionDenied)
	return ErrPermissionDenied
}

// unaryAuthorize is the unary authorization interceptor.
func (g *guard) unaryAuthorize(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if err := g.authorize(ctx, info.FullMethod, req); err != nil {
		return nil, err
	}
	return handler(ctx, req)
}

// streamAuthorize is the stream authorization interceptor: every message
// the handler receives is checked before the handler sees it.
func (g *guard) streamAuthorize(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	return handler(srv, &checkedStream{ServerStream: ss, check: func(m any) error { return g.authorize(ss.Context(), info.FullMethod, m) }})
}

// checkedStream checks each received message with check.
type checkedStream struct {
	grpc.ServerStream
	check func(m any) error
}

// RecvMsg receives a message and checks it.
func (s *checkedStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	return s.check(m)
}

// auditor writes the audit log: structured records with message "audit".
type auditor struct {
	log *slog.Logger
}

// denied records a refused call: who (principal name, or the presented
// credentials when unauthenticated), what, and the code answered.
func (a auditor) denied(ctx context.Context, principal, reason, target string, code codes.Code) {
	method, _ := grpc.Method(ctx)
	attrs := []slog.Attr{
		slog.String("event", "denied"),
		slog.String("principal", principal),
		slog.String("method", method),
		slog.String("target", target),
		slog.String("outcome", code.String()),
		slog.String("reason", reason),
	}
	if p, ok := peer.FromContext(ctx); ok {
		attrs = append(attrs, slog.String("peer", p.Addr.String()))
	}
	a.log.LogAttrs(ctx, slog.LevelWarn, "audit", attrs...)
}

// decisions is the interceptor recording every decision that changed
// replicas (a target's or a fleet's) and every deleted target or fleet.
func (a auditor) decisions(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	resp, err := handler(ctx, req)
	if err != nil {
		return resp, err
	}
	principal := func() string {
		if p, ok := auth.PrincipalFrom(ctx); ok {
			return p.Name
		}
		return "anonymous"
	}
	var (
		d    *setpointv1.Decision // a decision that rescales
		from int32
	)
	switch r := resp.(type) {
	case *setpointv1.RecommendResponse:
		if r.GetDecision().GetRescale() {
			d, from = r.GetDecision(), req.(*setpointv1.RecommendRequest).GetScale().GetReplicas()
		}
	case *setpointv1.ReportResponse:
		// A fleet's rescale: the service applies it by splitting it.
		if r.GetDecided() && r.GetDecision().GetRescale() {
			d, from = r.GetDecision(), r.GetDecision().GetExplanation().GetCurrentReplicas()
		}
	case *setpointv1.DeleteTargetResponse, *setpointv1.DeleteFleetResponse:
		a.log.LogAttrs(ctx, slog.LevelInfo, "audit",
			slog.String("event", "delete"),
			slog.String("principal", principal()),
			slog.String("method", info.FullMethod),
			slog.String("target", describeTarget(req)),
			slog.String("outcome", "deleted"),
		)
	}
	if d != nil {
		logAt(ctx, a.log, slog.LevelInfo, "audit", auditDecisionPC(), // a decision's source found once
			slog.String("event", "decision"),
			slog.String("principal", principal()),
			slog.String("method", info.FullMethod),
			slog.String("target", describeTarget(req)),
			slog.String("outcome", "rescale"),
			slog.Int("from", int(from)),
			slog.Int("to", int(d.GetDesiredReplicas())),
			slog.String("decision_id", d.GetDecisionId()),
		)
	}
	return resp, err
}

// auditDecisionPC is the source of the audit records of decisions (a line
// of this file).
var auditDecisionPC = sync.OnceValue(func() uintptr { return here(1) })

// describeTarget names the target (or cluster/namespace selection) of a
// request for the audit log.
func describeTarget(req any) string {
	// join joins the parts up to the first empty one with "/", in one
	// allocation.
	join := func(parts ...string) string {
		for i, p := range parts {
			if p == "" {
				parts = parts[:i]
				break
			}
		}
		return strings.Join(parts, "/")
	}
	switch r := req.(type) {
	case interface{ GetTarget() *setpointv1.TargetKey }:
		k := r.GetTarget()
		return join(k.GetCluster(), k.GetNamespace(), k.GetName())
	case *setpointv1.ListTargetsRequest:
		return join(r.GetCluster(), r.GetNamespace())
	case *setpointv1.WatchRequest:
		return join(r.GetCluster(), r.GetNamespace(), r.GetName())
	case *setpointv1.SimulateRequest:
		k := r.GetSeedFrom()
		return join(k.GetCluster(), k.GetNamespace(), k.GetName())
	case interface{ GetFleet() *setpointv1.FleetKey }:
		k := r.GetFleet()
		return join(fleetCluster, k.GetNamespace(), k.GetName())
	case *setpointv1.ListFleetsRequest:
		return join(fleetCluster, r.GetNamespace())
	case *setpointv1.SimulateFleetRequest:
		if k := r.GetSeedFrom(); k != nil {
			return join(fleetCluster, k.GetNamespace(), k.GetName())
		}
	}
	return ""
}
