package server

// The server's names for package auth's (who a caller is), so that its
// callers configure one package: the principals, their roles, the
// principals file and the reloading TLS configuration.

import (
	"context"
	"crypto/tls"

	"github.com/setpointhq/setpoint/server/auth"
)

// Principal is an authenticated caller (auth.Principal).
type Principal = auth.Principal

// Role says what a principal may do (auth.Role).
type Role = auth.Role

// AuthConfig is a parsed principals file (auth.Config).
type AuthConfig = auth.Config

// Authenticator authenticates callers with a principals file it reloads
// (auth.Authenticator).
type Authenticator = auth.Authenticator

// ReloadOptions say how often watched files are checked for changes
// (auth.ReloadOptions).
type ReloadOptions = auth.ReloadOptions

// TLSFiles are the files of the server's TLS configuration
// (auth.TLSFiles).
type TLSFiles = auth.TLSFiles

// The roles besides the per-cluster ones, and the grant of every cluster
// (package auth's).
const (
	RolePlatform          = auth.RolePlatform
	RoleAdmin             = auth.RoleAdmin
	AllClusters           = auth.AllClusters
	DefaultReloadInterval = auth.DefaultReloadInterval
)

// ClusterRole is the role of the agent of cluster name (auth.ClusterRole).
func ClusterRole(name string) Role { return auth.ClusterRole(name) }

// PrincipalFrom returns the principal of an authenticated call's context
// (auth.PrincipalFrom).
func PrincipalFrom(ctx context.Context) (Principal, bool) { return auth.PrincipalFrom(ctx) }

// ParseAuthConfig parses a principals file (auth.ParseConfig).
func ParseAuthConfig(b []byte) (*AuthConfig, error) { return auth.ParseConfig(b) }

// NewAuthenticator loads the principals file at path and reloads it when
// it changes (auth.NewAuthenticator).
func NewAuthenticator(path string, o ReloadOptions) (*Authenticator, error) {
	return auth.NewAuthenticator(path, o)
}

// NewTLSConfig returns the server's TLS configuration, reloading rotated
// certificates (auth.NewTLSConfig).
func NewTLSConfig(files TLSFiles, o ReloadOptions) (*tls.Config, error) {
	return auth.NewTLSConfig(files, o)
}
