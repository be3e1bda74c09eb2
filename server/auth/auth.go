// Package auth says who a caller is: the principals file (ParseConfig,
// reloaded by an Authenticator when it changes), the roles and what each
// may read and write, a caller's principal from a verified client
// certificate or a bearer token, and the server's TLS configuration that
// reloads rotated certificates (NewTLSConfig). The server's admission
// authenticates every call with it; what each method needs of a principal
// (the policy table) is the server's.
package auth

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	grpcauth "github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/auth"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"sigs.k8s.io/yaml"
)

// Role says what a principal may do.
type Role string

// The roles besides the per-cluster ones (see ClusterRole).
const (
	// RolePlatform may read (GetTarget, ListTargets, Watch, Simulate
	// seeded from a target) the targets of the clusters it is granted.
	RolePlatform Role = "platform"
	// RoleAdmin may call everything, for every cluster, including the
	// AdminService.
	RoleAdmin Role = "admin"
)

// clusterRolePrefix starts the role of a cluster's agent.
const clusterRolePrefix = "cluster:"

// AllClusters in a platform principal's clusters grants every cluster.
const AllClusters = "*"

// ClusterRole is the role of the agent of cluster name ("cluster:<name>"):
// it may decide for (Recommend, Observe, DeleteTarget) and read the targets
// of that cluster only.
func ClusterRole(name string) Role { return Role(clusterRolePrefix + name) }

// Cluster returns the cluster of a cluster role, and whether r is one.
func (r Role) Cluster() (string, bool) {
	name, ok := strings.CutPrefix(string(r), clusterRolePrefix)
	return name, ok && name != ""
}

// Principal is an authenticated caller.
type Principal struct {
	// Name identifies the principal in logs and audit records.
	Name string
	// Role says what it may do.
	Role Role
	// Clusters are the clusters a platform principal may read
	// (AllClusters for all); unused by the other roles.
	Clusters []string
}

// CanRead reports whether p may read the targets of cluster. The empty
// cluster stands for every cluster: only admins and platform principals
// granted AllClusters may read it.
func (p Principal) CanRead(cluster string) bool {
	switch p.Role {
	case RoleAdmin:
		return true
	case RolePlatform:
		return slices.Contains(p.Clusters, AllClusters) || (cluster != "" && slices.Contains(p.Clusters, cluster))
	}
	own, ok := p.Role.Cluster()
	return ok && cluster == own
}

// CanWrite reports whether p may decide for, observe or delete the targets
// of cluster: admins everywhere, a cluster's agent in its own cluster.
func (p Principal) CanWrite(cluster string) bool {
	if p.Role == RoleAdmin {
		return true
	}
	own, ok := p.Role.Cluster()
	return ok && cluster != "" && cluster == own
}

// principalKey is the context key of the authenticated principal.
type principalKey struct{}

// PrincipalFrom returns the principal authenticated for ctx; false when
// the server runs without authentication.
func PrincipalFrom(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(Principal)
	return p, ok
}

// WithPrincipal returns ctx carrying p.
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// Config maps credentials to principals: client certificate
// identities and SHA-256 digests of bearer tokens. Parse it with
// ParseConfig; the server reloads it with NewAuthenticator.
type Config struct {
	byIdentity map[string]Principal
	byToken    map[[sha256.Size]byte]Principal
}

// authFile is the principals file's format; see docs/security.md.
type authFile struct {
	Principals []struct {
		Name         string   `json:"name"`
		Role         Role     `json:"role"`
		Clusters     []string `json:"clusters,omitempty"`
		Certificates []string `json:"certificates,omitempty"`
		TokenSHA256  []string `json:"token_sha256,omitempty"`
	} `json:"principals"`
}

// ParseConfig parses a principals file (JSON or YAML; unknown fields
// are errors):
//
//	{"principals": [
//	  {"name": "agent-eu1", "role": "cluster:eu1",
//	   "certificates": ["spiffe://setpoint.example/cluster/eu1"]},
//	  {"name": "dashboard", "role": "platform", "clusters": ["eu1", "us1"],
//	   "token_sha256": ["<hex SHA-256 of the token>"]},
//	  {"name": "ops", "role": "admin", "certificates": ["ops.example"]}
//	]}
//
// A certificate identity is a URI SAN of the client certificate (a SPIFFE
// ID) or, for a certificate without URI SANs, its subject common name
// when that is not a URI (a SPIFFE ID is never taken from a common name).
// Tokens are stored only as their hex SHA-256.
func ParseConfig(b []byte) (*Config, error) {
	var f authFile
	if err := yaml.UnmarshalStrict(b, &f); err != nil {
		return nil, fmt.Errorf("principals file: %w", err)
	}
	c := &Config{byIdentity: map[string]Principal{}, byToken: map[[sha256.Size]byte]Principal{}}
	names := map[string]bool{}
	for i, e := range f.Principals {
		at := func(field string) string { return fmt.Sprintf("principals file: principals[%d]%s", i, field) }
		if e.Name == "" || names[e.Name] {
			return nil, fmt.Errorf("%s: must be set and unique", at(".name"))
		}
		names[e.Name] = true
		_, isCluster := e.Role.Cluster()
		switch {
		case e.Role == RolePlatform && len(e.Clusters) == 0:
			return nil, fmt.Errorf("%s: a platform principal needs its clusters (%q for all)", at(".clusters"), AllClusters)
		case e.Role != RolePlatform && len(e.Clusters) > 0:
			return nil, fmt.Errorf("%s: only platform principals take clusters", at(".clusters"))
		case e.Role != RolePlatform && e.Role != RoleAdmin && !isCluster:
			return nil, fmt.Errorf("%s: %q is not cluster:<name>, platform or admin", at(".role"), e.Role)
		case len(e.Certificates) == 0 && len(e.TokenSHA256) == 0:
			return nil, fmt.Errorf("%s: needs certificates or token_sha256", at(""))
		}
		p := Principal{Name: e.Name, Role: e.Role, Clusters: slices.Clone(e.Clusters)}
		for j, id := range e.Certificates {
			if _, dup := c.byIdentity[id]; dup || id == "" {
				return nil, fmt.Errorf("%s: empty or listed twice", at(fmt.Sprintf(".certificates[%d]", j)))
			}
			c.byIdentity[id] = p
		}
		for j, h := range e.TokenSHA256 {
			raw, err := hex.DecodeString(h)
			if err != nil || len(raw) != sha256.Size {
				return nil, fmt.Errorf("%s: not a hex SHA-256", at(fmt.Sprintf(".token_sha256[%d]", j)))
			}
			sum := [sha256.Size]byte(raw)
			if _, dup := c.byToken[sum]; dup {
				return nil, fmt.Errorf("%s: listed twice", at(fmt.Sprintf(".token_sha256[%d]", j)))
			}
			c.byToken[sum] = p
		}
	}
	return c, nil
}

// Authenticator authenticates callers with a principals file it reloads
// when the file changes (see ParseConfig and ReloadOptions).
type Authenticator struct {
	r *reloader[*Config]
}

// NewAuthenticator loads the principals file at path; it must parse now.
// Later a changed file is picked up within o.Interval; a file that no
// longer parses keeps the previous principals (and is logged).
func NewAuthenticator(path string, o ReloadOptions) (*Authenticator, error) {
	r, err := newReloader("principals file", []string{path}, func(b [][]byte) (*Config, error) { return ParseConfig(b[0]) }, o)
	if err != nil {
		return nil, err
	}
	return &Authenticator{r: r}, nil
}

// ErrUnauthenticated is the one answer to missing or unknown credentials.
var ErrUnauthenticated = status.Error(codes.Unauthenticated, "authentication required: a client certificate or bearer token of a known principal")

// Authenticate finds the caller's principal: the identity of a verified
// client certificate when the principals file lists it, else the bearer
// token's. Neither is Unauthenticated.
func (a *Authenticator) Authenticate(ctx context.Context) (Principal, string, error) {
	token, err := grpcauth.AuthFromMD(ctx, "bearer")
	if err != nil {
		token = ""
	}
	return a.principal(VerifiedClientCert(ctx), token)
}

// principal finds the principal of a verified client certificate (nil when
// none) or, failing that, of a bearer token ("" when none): the one answer
// of the gRPC API and the web console. It also returns what was presented,
// for the audit log.
func (a *Authenticator) principal(leaf *x509.Certificate, token string) (Principal, string, error) {
	c := a.r.current()
	var presented string
	if leaf != nil {
		for _, id := range certIdentities(leaf) {
			if p, ok := c.byIdentity[id]; ok {
				return p, "certificate " + id, nil
			}
			presented = "certificate " + id
		}
	}
	if token == "" {
		return Principal{}, presented, ErrUnauthenticated
	}
	// Looking the digest up in a map is safe from timing attacks: what
	// the lookup's timing could reveal is about the digest, not the token.
	if p, ok := c.byToken[sha256.Sum256([]byte(token))]; ok {
		return p, "token", nil
	}
	return Principal{}, "unknown token", ErrUnauthenticated
}

// VerifiedClientCert returns the client certificate of ctx's connection
// when the TLS handshake verified it against the client CA; nil otherwise.
func VerifiedClientCert(ctx context.Context) *x509.Certificate {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return nil
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(info.State.VerifiedChains) == 0 || len(info.State.VerifiedChains[0]) == 0 {
		return nil
	}
	return info.State.VerifiedChains[0][0]
}

// certIdentities returns a certificate's identities: its URI SANs (SPIFFE
// IDs), or its subject common name when it has none. A common name that
// is a URI ("spiffe://…") is no identity: a URI identity is taken only
// from a URI SAN, the field a SPIFFE issuer vouches for; plain names
// ("ops.example") are the principals file's way of configuring the
// common-name fallback.
func certIdentities(c *x509.Certificate) []string {
	if len(c.URIs) > 0 {
		ids := make([]string, len(c.URIs))
		for i, u := range c.URIs {
			ids[i] = u.String()
		}
		return ids
	}
	if cn := c.Subject.CommonName; cn != "" && !strings.Contains(cn, "://") {
		return []string{cn}
	}
	return nil
}
