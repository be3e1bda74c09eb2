package setpointclient

// DefaultServiceConfig is the gRPC service config Dial uses unless
// Options.ServiceConfig replaces it:
//
//   - calls are balanced round-robin over every server the address names
//     (round_robin), among those whose gRPC health service answers SERVING
//     for setpoint.v1.AutoscalerService: a server shutting down, or whose
//     store is unreachable, gets no new calls; a server without the health
//     service counts as healthy;
//   - reads (GetTarget, ListTargets, Simulate, and FleetService's
//     GetFleet, ListFleets, SimulateFleet) time out after 10 s and are
//     tried up to 4 times on UNAVAILABLE, backing off from 100 ms to 2 s,
//     each attempt on the next server;
//   - Recommend, Observe, DeleteTarget, and FleetService's PutFleet,
//     DeleteFleet and Report time out after 10 s and are not retried,
//     because a retry after a lost answer would record twice (gRPC still
//     retries, on another server, a call that never reached one: the
//     connection had failed, or the server was shutting down);
//   - Watch and AdminService.Backup are long-lived streams: no timeout.
//
// A shorter deadline on the caller's context always wins.
const DefaultServiceConfig = `{
  "loadBalancingConfig": [{"round_robin": {}}],
  "healthCheckConfig": {"serviceName": "setpoint.v1.AutoscalerService"},
  "methodConfig": [
    {
      "name": [
        {"service": "setpoint.v1.AutoscalerService", "method": "GetTarget"},
        {"service": "setpoint.v1.AutoscalerService", "method": "ListTargets"},
        {"service": "setpoint.v1.AutoscalerService", "method": "Simulate"},
        {"service": "setpoint.v1.FleetService", "method": "GetFleet"},
        {"service": "setpoint.v1.FleetService", "method": "ListFleets"},
        {"service": "setpoint.v1.FleetService", "method": "SimulateFleet"}
      ],
      "timeout": "10s",
      "retryPolicy": {
        "maxAttempts": 4,
        "initialBackoff": "0.1s",
        "maxBackoff": "2s",
        "backoffMultiplier": 2,
        "retryableStatusCodes": ["UNAVAILABLE"]
      }
    },
    {
      "name": [
        {"service": "setpoint.v1.AutoscalerService", "method": "Recommend"},
        {"service": "setpoint.v1.AutoscalerService", "method": "Observe"},
        {"service": "setpoint.v1.AutoscalerService", "method": "DeleteTarget"},
        {"service": "setpoint.v1.FleetService", "method": "PutFleet"},
        {"service": "setpoint.v1.FleetService", "method": "DeleteFleet"},
        {"service": "setpoint.v1.FleetService", "method": "Report"}
      ],
      "timeout": "10s"
    }
  ]
}`
