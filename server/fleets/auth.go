package fleets

import (
	"context"
	"errors"

	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"github.com/setpointhq/setpoint/server/auth"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// caller is who calls a handler: a principal, or nobody on a server
// without authentication (who may do everything).
type caller struct {
	p *auth.Principal
}

// caller returns the caller of ctx; Unauthenticated when the server
// authenticates and ctx has no principal.
func (s *Service) caller(ctx context.Context) (*caller, error) {
	if !s.Authenticated {
		return &caller{}, nil
	}
	p, ok := auth.PrincipalFrom(ctx)
	if !ok {
		return nil, status.Error(codes.Unauthenticated, "not authenticated")
	}
	return &caller{p: &p}, nil
}

// all reports whether p may read every member cluster of spec.
func (c *caller) all(spec *setpointv1.FleetSpec) bool {
	for _, m := range spec.GetMembers() {
		if !c.p.CanRead(m.GetCluster()) {
			return false
		}
	}
	return true
}

// mayManage reports whether the caller may create, change or delete a
// fleet of spec: an admin, or a platform principal that may read every
// member cluster.
func (c *caller) mayManage(spec *setpointv1.FleetSpec) bool {
	switch {
	case c.p == nil || c.p.Role == auth.RoleAdmin:
		return true
	case c.p.Role == auth.RolePlatform:
		return c.all(spec)
	}
	return false
}

// mayRead reports whether the caller may read a fleet of spec: who may
// manage it, and the agents of its member clusters.
func (c *caller) mayRead(spec *setpointv1.FleetSpec) bool {
	return c.mayManage(spec) || c.member(spec) != ""
}

// member returns the caller's cluster when the caller is the agent of a
// member cluster of spec, "" otherwise.
func (c *caller) member(spec *setpointv1.FleetSpec) string {
	if c.p == nil {
		return ""
	}
	own, ok := c.p.Role.Cluster()
	if !ok {
		return ""
	}
	for _, m := range spec.GetMembers() {
		if m.GetCluster() == own {
			return own
		}
	}
	return ""
}

// mayReport reports whether the caller may report as member to a fleet
// of spec: an admin for any member, a member cluster's agent for its own.
func (c *caller) mayReport(spec *setpointv1.FleetSpec, member string) bool {
	if c.p == nil || c.p.Role == auth.RoleAdmin {
		return true
	}
	return member != "" && c.member(spec) == member
}

// hide turns errNoFleet into errDenied for a caller who may not learn
// whether a fleet exists: everyone but admins (and callers of a server
// without authentication).
func (c *caller) hide(err error) error {
	if errors.Is(err, errNoFleet) && c.p != nil && c.p.Role != auth.RoleAdmin {
		return errDenied
	}
	return err
}
