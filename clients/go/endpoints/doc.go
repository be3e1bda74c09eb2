// Package endpoints lets a gRPC client of Setpoint reach every server
// replica: it turns an address naming one server or several into a gRPC
// target, and gives the service config that balances calls over the
// replicas that are healthy.
//
// An address is one of
//
//   - host:port, resolved by DNS; every address the name has is used (with
//     a headless Kubernetes Service, every server replica);
//   - any gRPC target, such as dns:///setpoint-headless.setpoint-system:7443;
//   - a comma-separated list of host:port, exactly those servers.
//
// With Balanced in the connection's service config, calls go round-robin
// to the replicas whose gRPC health service answers SERVING for
// setpoint.v1.AutoscalerService: a server shutting down, or whose store is
// unreachable, gets no new calls. The Go client (package setpointclient)
// and setpoint-agent use it; the package depends on gRPC alone.
package endpoints
