// Package server is Setpoint's gRPC service: the AutoscalerService of
// proto/setpoint/v1 over the engine and a store.Store, and the
// FleetService (package fleets), behind the same admission.
//
// Handlers are thin: validate and convert the request (package convert,
// where every Kubernetes default is resolved), run a target transition
// (package target: the pure engine plus the record's bookkeeping) inside
// one store transaction, convert the outcome back, and map errors with one
// toStatus. The server clock is a field (Options.Now), so tests and the
// conformance runner can step it.
//
// Before a call's body is read, gRPC's tap handle (package admission) admits it: for
// the guarded services (with an Authenticator) a verified client
// certificate's identity (URI SAN; a subject CN only when it is not a URI)
// or a bearer token's SHA-256 names a Principal from the principals file,
// else Unauthenticated; then the per-principal rate limit (token bucket:
// ResourceExhausted with a google.rpc.RetryInfo), and for callers without
// a principal a per-peer-address one. A refused caller costs its headers;
// refusals are counted in setpoint_server_refused_total and their audit is
// sampled. Health and reflection need no credentials.
//
// Every admitted call then passes one explicit interceptor chain,
// outermost first:
//
//  1. Prometheus metrics (grpc_server_handled_total, handling-time
//     histograms), exposed by MetricsHandler on /metrics;
//  2. logging (log/slog) of every finished call;
//  3. the rejection of undecodable requests (package codec): a request the
//     codec could not unmarshal is InvalidArgument, before anything else
//     may end the call; when the call is over, the memory a Recommend
//     request was decoded into is kept for the next (package codec);
//  4. for a unary call that arrives without a deadline, the server's
//     (Options.CallTimeout), so that a store that cannot
//     answer (a disk stalling its flushes) ends the call with
//     DeadlineExceeded instead of holding it; the steps below, the
//     fairness queues included, wait within it;
//  5. authentication: the principal the tap handle found;
//  6. authorization: the target (or cluster) inside the request against
//     the principal's role — one policy table for every method of
//     AutoscalerService, FleetService and AdminService, admin-only by
//     default — else
//     PermissionDenied with a message that names nothing;
//  7. request limits: pods and metrics per request, and the size budgets
//     (package budget: every string, list and map, the spec a target stores),
//     answered as InvalidArgument with a google.rpc.BadRequest;
//  8. the audit of decisions that changed replicas (denials are audited
//     where they happen);
//  9. validation: the request's Validate method (hand-written next to the
//     generated types), answered as InvalidArgument with a
//     google.rpc.BadRequest detail;
//  10. fairness (package fairness): per-principal bounds on calls, bytes, Simulates
//     and streams, and per-principal queues served round-robin in front of
//     the handlers (and so of any store);
//  11. the in-flight bound on Recommend: ResourceExhausted when full;
//  12. recovery, last: a panic answers Internal with a generic message and
//     its stack is logged.
//
// Server streams pass the same steps but the fourth (Watch and Backup are
// long by design and keep the deadline they came with, if any): their
// request is checked as the handler receives it. Transport limits (message size, streams per
// connection, keepalive enforcement, handshake and idle timeouts) are gRPC
// server options. So are the cost-cutting ones: calls run on gRPC stream
// workers (Options.StreamWorkers: goroutines kept between calls, so a
// call does not grow a fresh goroutine's stack), which Serve starts and
// stops with the gRPC server it builds; and the codec (Codec, package codec)
// encodes and decodes with the code generated for each message
// (vtprotobuf), checking what that code does not (UTF-8). ListTargets pages are sized by bytes (service.go). TLS comes
// from NewTLSConfig, which reloads rotated files; docs/security.md has the
// threat model and the operator's view.
//
// Validation is a small interceptor of this package rather than
// go-grpc-middleware's validator: that one answers with the error's text
// only, and callers need the field violations as a BadRequest detail.
// protovalidate was not used because its rules (buf/validate/validate.proto)
// are fetched from the buf registry, which this project does not use.
//
// Streams (Watch) pass metrics, logging, authentication, the per-principal
// stream bound and recovery; Watch
// filters what it sends by the principal's clusters itself. It is fed by
// the store's change feed (store.Store embeds store.Feed; New fails when it
// cannot be followed) through a hub (package watch) that never blocks the
// store's committer: each stream has a bounded buffer and is ended with
// Aborted, to resume, when it falls behind.
//
// Recommend and Observe run a target's transitions (target.Decide,
// target.Observe) inside one store.Update each. Simulate runs the same
// transitions over a series of inputs on a target record kept in memory
// and writes nothing. ListDecisions pages through a target's decision log,
// which the store writes with each decision.
//
// ConsoleHandler serves the web console (package console) on the HTTP
// address. Its JSON endpoints do not call the service: each makes gRPC
// calls, as the browser, on an in-memory connection to this server's own
// gRPC server (package transport; the contract is package door), so every console
// request passes the tap handle and the chain above like any call — one
// way in. docs/console.md describes it.
//
// Before any of it, the transport: a request's HTTP/2 header list is
// limited (Options.MaxHeaderListSize) and a header block left unfinished
// longer than Options.HeaderTimeout closes its connection (package transport),
// so an anonymous connection holds kilobytes.
//
// The rooms, each a package with one job that server imports and that
// imports nothing of server: admission (the tap handle, the per-principal
// policy, the rate and request limits, the access log and the interceptor
// chain above, which New wires), auth (who a caller is; the server keeps its
// names for them), transport (the gRPC port's connections: unfinished
// header blocks, the console's door), fairness (per-principal bounds and
// queues), budget (the size budgets), codec (decoding requests), simulate
// (what-ifs through the engine), convert (proto ↔ engine), console (the web
// console, through the door), door (the contract of the door), watch (the
// Watch streams, their hub over the change feed and the resume points of
// tenants). The handlers (service.go, admin.go, session.go, replay.go) are
// still files of this package.
//
// Serve runs the server on a listener until its context ends, then shuts
// down gracefully: health turns NOT_SERVING, GracefulStop waits for calls in
// flight (Stop after Options.ShutdownTimeout). The caller closes the store
// afterwards. While serving, targets not seen for Options.ExpireAfter are
// removed as Serve starts and then every Options.ExpireInterval (the
// server's expiry loop, the only one).
package server
