package endpoints

import (
	"fmt"
	"net"
	"strings"

	"google.golang.org/grpc"
	// The client-side health checking Balanced asks for.
	_ "google.golang.org/grpc/health"
	"google.golang.org/grpc/resolver"
)

// Balanced is a gRPC service config (JSON) that balances calls
// round-robin over every server an address names, among those whose
// health service answers SERVING for setpoint.v1.AutoscalerService; a
// server without the health service counts as healthy. Its two entries may
// be combined with method configs (timeouts, retries) in one service
// config, as setpointclient.DefaultServiceConfig does.
const Balanced = `{
  "loadBalancingConfig": [{"round_robin": {}}],
  "healthCheckConfig": {"serviceName": "setpoint.v1.AutoscalerService"}
}`

// listScheme is the resolver scheme of a comma-separated address list.
const listScheme = "setpoint-list"

// Target returns what grpc.NewClient needs to reach every server addr
// names (see the package doc for its forms): the target to dial and, for
// a list, the dial option that resolves it. It does not set a service
// config.
func Target(addr string) (string, []grpc.DialOption, error) {
	if addr == "" {
		return "", nil, fmt.Errorf("endpoints: empty server address")
	}
	if !strings.Contains(addr, ",") {
		return addr, nil, nil
	}
	b := &listBuilder{}
	for a := range strings.SplitSeq(addr, ",") {
		host, port, err := net.SplitHostPort(strings.TrimSpace(a))
		if err != nil || host == "" || port == "" {
			return "", nil, fmt.Errorf("endpoints: %q in the address list %q is not host:port", a, addr)
		}
		b.addrs = append(b.addrs, resolver.Address{Addr: net.JoinHostPort(host, port), ServerName: host})
	}
	return listScheme + ":///" + addr, []grpc.DialOption{grpc.WithResolvers(b)}, nil
}

// Split returns the servers addr lists, or addr itself when it names one
// server or is a gRPC target.
func Split(addr string) []string {
	var out []string
	for a := range strings.SplitSeq(addr, ",") {
		out = append(out, strings.TrimSpace(a))
	}
	return out
}

// listBuilder resolves a comma-separated address list to its addresses,
// once: they are fixed.
type listBuilder struct {
	addrs []resolver.Address
}

// Scheme implements resolver.Builder.
func (b *listBuilder) Scheme() string { return listScheme }

// Build implements resolver.Builder.
func (b *listBuilder) Build(_ resolver.Target, cc resolver.ClientConn, _ resolver.BuildOptions) (resolver.Resolver, error) {
	if err := cc.UpdateState(resolver.State{Addresses: b.addrs}); err != nil {
		return nil, err
	}
	return listResolver{}, nil
}

// OverrideAuthority implements resolver.AuthorityOverrider: the
// connection's authority is the first server's, not the whole list (each
// server's TLS certificate is verified against its own host name).
func (b *listBuilder) OverrideAuthority(resolver.Target) string { return b.addrs[0].Addr }

// listResolver has nothing to re-resolve.
type listResolver struct{}

// ResolveNow implements resolver.Resolver.
func (listResolver) ResolveNow(resolver.ResolveNowOptions) {}

// Close implements resolver.Resolver.
func (listResolver) Close() {}
