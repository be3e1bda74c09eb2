package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"slices"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/auth"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Role says which methods a principal may call.
type Role string

// The roles.
const (
	// RoleAgent may call Recommend and Observe for its clusters.
	RoleAgent Role = "agent"
	// RoleReader may call GetTarget and ListTargets for its clusters.
	RoleReader Role = "reader"
	// RoleAdmin may call everything, for every cluster.
	RoleAdmin Role = "admin"
)

// AllClusters in a principal's clusters admits every cluster.
const AllClusters = "*"

// Principal is who a bearer token authenticates.
type Principal struct {
	// Name identifies the principal in logs.
	Name string `json:"name"`
	// Role says which methods it may call.
	Role Role `json:"role"`
	// Clusters are the clusters it may act on ("*" for all); ignored for
	// admins.
	Clusters []string `json:"clusters"`
}

// Tokens maps bearer tokens to principals. Load it with LoadTokens.
type Tokens struct {
	bySum map[[sha256.Size]byte]Principal
}

// tokenFile is the token file's format.
type tokenFile struct {
	Principals []struct {
		Principal
		// Token is the bearer token in clear; or
		Token string `json:"token"`
		// TokenSHA256 is the hex SHA-256 of the bearer token.
		TokenSHA256 string `json:"token_sha256"`
	} `json:"principals"`
}

// LoadTokens reads a token file: JSON of the form
//
//	{"principals": [
//	  {"name": "agent-eu1", "role": "agent",  "clusters": ["eu1"], "token": "…"},
//	  {"name": "dashboard", "role": "reader", "clusters": ["*"], "token_sha256": "<hex sha256 of the token>"},
//	  {"name": "ops",       "role": "admin",  "token": "…"}
//	]}
func LoadTokens(path string) (*Tokens, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("server: token file: %w", err)
	}
	return ParseTokens(b)
}

// ParseTokens parses the content of a token file (see LoadTokens).
func ParseTokens(b []byte) (*Tokens, error) {
	var f tokenFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("server: token file: %w", err)
	}
	t := &Tokens{bySum: make(map[[sha256.Size]byte]Principal)}
	for i, p := range f.Principals {
		var sum [sha256.Size]byte
		switch {
		case p.Token != "" && p.TokenSHA256 == "":
			sum = sha256.Sum256([]byte(p.Token))
		case p.Token == "" && p.TokenSHA256 != "":
			raw, err := hex.DecodeString(p.TokenSHA256)
			if err != nil || len(raw) != sha256.Size {
				return nil, fmt.Errorf("server: token file: principals[%d].token_sha256: not a hex SHA-256", i)
			}
			copy(sum[:], raw)
		default:
			return nil, fmt.Errorf("server: token file: principals[%d]: exactly one of token and token_sha256 must be set", i)
		}
		switch p.Role {
		case RoleAgent, RoleReader, RoleAdmin:
		default:
			return nil, fmt.Errorf("server: token file: principals[%d].role: %q is not agent, reader or admin", i, p.Role)
		}
		if p.Name == "" {
			return nil, fmt.Errorf("server: token file: principals[%d].name: must be set", i)
		}
		if _, dup := t.bySum[sum]; dup {
			return nil, fmt.Errorf("server: token file: principals[%d]: duplicate token", i)
		}
		t.bySum[sum] = p.Principal
	}
	return t, nil
}

// principalKey is the context key of the authenticated principal.
type principalKey struct{}

// PrincipalFrom returns the principal authenticated for ctx.
func PrincipalFrom(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(Principal)
	return p, ok
}

// authenticate is the auth.AuthFunc: the bearer token names a principal.
func (t *Tokens) authenticate(ctx context.Context) (context.Context, error) {
	token, err := auth.AuthFromMD(ctx, "bearer")
	if err != nil {
		return nil, err
	}
	p, ok := t.bySum[sha256.Sum256([]byte(token))]
	if !ok {
		return nil, status.Error(codes.Unauthenticated, "unknown bearer token")
	}
	return context.WithValue(ctx, principalKey{}, p), nil
}

// methodRoles lists the roles, besides admin, allowed to call each method.
var methodRoles = map[string]Role{
	setpointv1.AutoscalerService_Recommend_FullMethodName:   RoleAgent,
	setpointv1.AutoscalerService_Observe_FullMethodName:     RoleAgent,
	setpointv1.AutoscalerService_GetTarget_FullMethodName:   RoleReader,
	setpointv1.AutoscalerService_ListTargets_FullMethodName: RoleReader,
}

// authorize admits a call when the principal's role allows the method and
// its clusters the request's cluster.
func authorize(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	p, ok := PrincipalFrom(ctx)
	if !ok {
		return nil, status.Error(codes.Unauthenticated, "not authenticated")
	}
	if p.Role == RoleAdmin {
		return handler(ctx, req)
	}
	if methodRoles[info.FullMethod] != p.Role {
		return nil, status.Errorf(codes.PermissionDenied, "%s (role %s) may not call %s", p.Name, p.Role, info.FullMethod)
	}
	var cluster string
	switch r := req.(type) {
	case interface{ GetTarget() *setpointv1.TargetKey }:
		cluster = r.GetTarget().GetCluster()
	case *setpointv1.ListTargetsRequest:
		cluster = r.GetCluster()
	}
	if !slices.Contains(p.Clusters, AllClusters) && (cluster == "" || !slices.Contains(p.Clusters, cluster)) {
		return nil, status.Errorf(codes.PermissionDenied, "%s may not act on cluster %q", p.Name, cluster)
	}
	return handler(ctx, req)
}
