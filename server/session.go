package server

// The Session service (setpoint.console.v1.SessionService, from
// proto/setpoint/console/v1): who the caller is. The console asks it
// (through the same door and admission as every call) to show its caller's
// principal and to know which clusters a list without a cluster shows; any
// client may ask it.

import (
	"context"

	consolev1 "github.com/setpointhq/setpoint/proto/setpoint/console/v1"
)

// session implements consolev1.SessionServiceServer.
type session struct {
	consolev1.UnimplementedSessionServiceServer
}

// Who answers the caller's principal, role and readable clusters; without
// authentication only the readable clusters ([""]: every cluster).
func (session) Who(ctx context.Context, _ *consolev1.WhoRequest) (*consolev1.WhoResponse, error) {
	p, ok := PrincipalFrom(ctx)
	if !ok {
		return &consolev1.WhoResponse{ReadableClusters: []string{""}}, nil
	}
	return &consolev1.WhoResponse{Principal: p.Name, Role: string(p.Role), ReadableClusters: readableClusters(p)}, nil
}

// readableClusters are the clusters whose targets a list without a
// cluster filter shows p: "" (every cluster) when it may read all, its
// own for a cluster's agent, its clusters for a platform role.
func readableClusters(p Principal) []string {
	if p.CanRead("") {
		return []string{""}
	}
	if own, ok := p.Role.Cluster(); ok {
		return []string{own}
	}
	if p.Role == RolePlatform {
		return p.Clusters
	}
	return nil
}
