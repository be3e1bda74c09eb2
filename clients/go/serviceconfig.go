package setpointclient

// DefaultServiceConfig is the gRPC service config Dial uses unless
// Options.ServiceConfig replaces it:
//
//   - reads (GetTarget, ListTargets, Simulate) time out after 10 s and are
//     tried up to 4 times on UNAVAILABLE, backing off from 100 ms to 2 s;
//   - Recommend, Observe and DeleteTarget time out after 10 s and are not
//     retried, because a retry after a lost answer would record twice;
//   - Watch and AdminService.Backup are long-lived streams: no timeout.
//
// A shorter deadline on the caller's context always wins.
const DefaultServiceConfig = `{
  "methodConfig": [
    {
      "name": [
        {"service": "setpoint.v1.AutoscalerService", "method": "GetTarget"},
        {"service": "setpoint.v1.AutoscalerService", "method": "ListTargets"},
        {"service": "setpoint.v1.AutoscalerService", "method": "Simulate"}
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
        {"service": "setpoint.v1.AutoscalerService", "method": "DeleteTarget"}
      ],
      "timeout": "10s"
    }
  ]
}`
