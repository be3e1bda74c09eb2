// Package setpointclient is the Go client of Setpoint's gRPC API, for
// agents and other platforms (capacity planners, cost tools, dashboards,
// deploy pipelines). Import it as
//
//	import setpointclient "github.com/setpointhq/setpoint/clients/go"
//
// # Connecting
//
// Dial takes an address and Options and returns a Client; the connection
// is made by the first call. A production server speaks TLS: give the CA
// that signed its certificate, and either a client certificate (mutual
// TLS) or a bearer token, or both.
//
//	tc, err := setpointclient.TLSFiles{CA: "ca.pem", Cert: "client.pem", Key: "client-key.pem"}.Config()
//	c, err := setpointclient.Dial("setpoint.example:7443", setpointclient.Options{TLS: tc, Token: token})
//	defer c.Close()
//
// Without TLS the client speaks plaintext, meant for a development server
// on loopback (setpoint-server -insecure-dev); Dial refuses to send a token
// in plaintext to any other address.
//
// A long-running client (setpoint-agent is one) keeps its credentials
// fresh and its connections alive: TLSFiles' configuration reads the
// client certificate again at every handshake, Options.TokenFile is read
// at every call, Options.Keepalive pings a quiet connection so a dead one
// is replaced, and Options.Reconnect shortens the back-off between
// attempts to reconnect.
//
//	tc, err := setpointclient.TLSFiles{CA: "ca.crt", Cert: "tls.crt", Key: "tls.key"}.Config()
//	c, err := setpointclient.Dial(addr, setpointclient.Options{
//		TLS:       tc,
//		TokenFile: "/var/run/secrets/setpoint/token",
//		Keepalive: keepalive.ClientParameters{Time: 30 * time.Second, Timeout: 10 * time.Second, PermitWithoutStream: true},
//	})
//
// # Several servers
//
// Setpoint on etcd runs several server replicas sharing one history
// (docs/scale-out.md). The address Dial takes may name all of them: a
// host:port whose DNS name has several addresses (a headless Kubernetes
// Service), a gRPC target such as
// dns:///setpoint-headless.setpoint-system:7443, or a comma-separated list
// of host:port (package endpoints). Calls go round-robin to the replicas
// whose gRPC health service answers SERVING, so a replica shutting down
// or cut off from etcd gets no new calls, and a read that fails with
// UNAVAILABLE is retried on the next replica.
//
// # Retries and deadlines
//
// Every call gets a deadline and the reads (GetTarget, ListTargets,
// Simulate, and the fleet reads) are retried on UNAVAILABLE with exponential back-off, through
// the gRPC service config in DefaultServiceConfig. A deadline already on
// the caller's context wins when it is shorter. Recommend, Observe and
// DeleteTarget are not retried: they change the target's history, and a
// retry after a lost answer would record the change twice (gRPC itself
// retries, on another replica, a call that never reached a server). Watch and
// Backup are streams and have no deadline; Changes resumes a broken watch
// by itself.
//
// # Errors
//
// A failed call returns the gRPC status error (status.Code reads it), but
// where the status alone would read like internals the error says what
// happened in the caller's terms and matches a sentinel with errors.Is:
// ErrUnreachable (no server answers at the address: is it running?),
// ErrTLSMismatch (plaintext to a TLS server or the reverse),
// ErrTargetNotFound (naming the target's CLUSTER/NAMESPACE/NAME),
// ErrFleetNotFound (naming the fleet's NAMESPACE/NAME), and ErrBadKey from
// ParseKey and ParseFleetKey (showing the expected form).
//
// # Calls
//
// Client embeds the generated AutoscalerServiceClient, so every RPC is a
// method (c.Recommend, c.GetTarget, ...). The helpers cover what most
// callers write by hand: Decide returns a Recommend's decision, Applied,
// Failed and ExternalChange report what happened to it, FieldViolations
// reads which fields an INVALID_ARGUMENT names, Targets iterates
// over every page of ListTargets, Changes follows Watch across
// reconnections, and Backup copies a verified snapshot of the store.
//
// # Fleets
//
// Client also embeds the generated FleetServiceClient (c.PutFleet,
// c.GetFleet, c.ListFleets, c.DeleteFleet, c.Report, c.SimulateFleet): one
// autoscaler over a workload that runs in several member clusters, whose
// total is split among the members (docs/fleets.md). A fleet is named
// NAMESPACE/NAME (FleetKey, ParseFleetKey, FleetKeyString); Fleet returns
// what the service keeps of one, Fleets iterates over every page of
// ListFleets, and Share picks one member's share out of a split.
//
//	f, err := c.Fleet(ctx, setpointclient.FleetKey("shop", "web"))
//	for _, s := range f.GetSplit().GetShares() {
//		fmt.Printf("%s: %d (%s) %s\n", s.GetMember(), s.GetReplicas(), s.GetReason(), s.GetMessage())
//	}
//
// GetFleet, ListFleets and SimulateFleet are reads, retried as the
// target reads are; PutFleet, DeleteFleet and Report are not retried.
package setpointclient
