/**
 * TypeScript client of Setpoint's gRPC API for Node.js: the generated
 * message types and services (from proto/ by protoc-gen-es) and a client
 * that speaks the gRPC protocol over HTTP/2 with @connectrpc/connect-node.
 *
 *     const sp = createSetpointClient({ baseUrl: "https://setpoint.example:7443", token, ca });
 *     const { decision } = await sp.autoscaler.recommend(request);
 *
 * Like the Go client, every call gets a default deadline, the reads
 * (getTarget, listTargets, simulate, and the fleet reads getFleet,
 * listFleets, simulateFleet) are retried on UNAVAILABLE with back-off, and
 * a bearer token is never sent in plaintext except to a loopback address.
 *
 * Fleets (one autoscaler over a workload in several member clusters,
 * docs/fleets.md) are sp.fleet's calls:
 *
 *     const { fleet } = await sp.fleet.getFleet({ fleet: { namespace: "shop", name: "web" } });
 *     for (const s of fleet!.split!.shares) console.log(s.member, s.replicas, s.reason, s.message);
 */
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { BinaryReader, WireType } from "@bufbuild/protobuf/wire";
import { Code, ConnectError, createClient, type Client, type Interceptor } from "@connectrpc/connect";
import { createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";
import { AdminService } from "./gen/setpoint/v1/admin_pb.js";
import { FleetService, ListFleetsRequestSchema, type Fleet } from "./gen/setpoint/v1/fleet_pb.js";
import {
  AutoscalerService,
  ListTargetsRequestSchema,
  WatchRequestSchema,
  type Decision,
  RecommendRequestSchema,
  type Target,
  type WatchResponse,
} from "./gen/setpoint/v1/setpoint_pb.js";

export * from "./gen/setpoint/v1/setpoint_pb.js";
export * from "./gen/setpoint/v1/admin_pb.js";
export * from "./gen/setpoint/v1/fleet_pb.js";

/** Options of createSetpointClient. */
export interface SetpointClientOptions {
  /** The server: "http://127.0.0.1:7443" (plaintext, development) or "https://host:7443". */
  baseUrl: string;
  /**
   * Other replicas of the same service (same scheme, token and TLS). Unary
   * calls go to baseUrl; changes() moves to the next replica whenever a
   * stream breaks, so a replica that is down, or whose change feed is a
   * moment behind (it answers UNAVAILABLE), does not stop the following.
   */
  replicas?: string[];
  /** Bearer token sent with every call; refused over http:// except to loopback. */
  token?: string;
  /** PEM of the CA that verifies the server's certificate; default: Node's roots. */
  ca?: string | Buffer;
  /** PEM client certificate and key, for mutual TLS; both or neither. */
  cert?: string | Buffer;
  key?: string | Buffer;
  /** Name verified in the server's certificate, when not the host of baseUrl. */
  serverName?: string;
  /** Deadline of each unary call in milliseconds; default 10 000. Streams have none. */
  timeoutMs?: number;
  /** Attempts of a read answered UNAVAILABLE; default 4 (1 disables retries). */
  maxAttempts?: number;
}

/** The reads retried on UNAVAILABLE: they change nothing on the server. */
const retriedMethods = new Set(["GetTarget", "ListTargets", "Simulate", "GetFleet", "ListFleets", "SimulateFleet"]);

/** A client of one Setpoint server. close() releases its HTTP/2 session. */
export interface SetpointClient {
  /** AutoscalerService: recommend, observe, getTarget, listTargets, deleteTarget, simulate, watch. */
  readonly autoscaler: Client<typeof AutoscalerService>;
  /** AdminService (admin principals only): backup. */
  readonly admin: Client<typeof AdminService>;
  /** FleetService: putFleet, getFleet, listFleets, deleteFleet, report, simulateFleet. */
  readonly fleet: Client<typeof FleetService>;
  /** Calls Recommend and returns its decision. */
  decide(req: MessageInitShape<typeof RecommendRequestSchema>): Promise<Decision>;
  /** Every target the request selects, page after page. */
  targets(req?: MessageInitShape<typeof ListTargetsRequestSchema>): AsyncGenerator<Target>;
  /** Every fleet the request selects that the caller may read, page after page. */
  fleets(req?: MessageInitShape<typeof ListFleetsRequestSchema>): AsyncGenerator<Fleet>;
  /**
   * Follows Watch: yields every change, and when the stream breaks
   * (UNAVAILABLE, or the server ends it) watches again from the last
   * revision seen — on the next of the replicas, when options name some —
   * so nothing the service keeps is missed or repeated. Ends when signal
   * aborts or with an error a retry cannot fix.
   */
  changes(req?: MessageInitShape<typeof WatchRequestSchema>, signal?: AbortSignal): AsyncGenerator<WatchResponse>;
  /** Closes the connection. */
  close(): void;
}

/** Creates a client; the connection is made by the first call. */
export function createSetpointClient(o: SetpointClientOptions): SetpointClient {
  const baseUrls = [o.baseUrl, ...(o.replicas ?? [])];
  for (const u of baseUrls) {
    const url = new URL(u);
    const loopback = ["localhost", "127.0.0.1", "[::1]"].includes(url.hostname);
    if (o.token && url.protocol !== "https:" && !loopback) {
      throw new Error(`setpoint: refusing to send a bearer token in plaintext to ${url.host}: use https://`);
    }
  }
  if ((o.cert === undefined) !== (o.key === undefined)) {
    throw new Error("setpoint: client certificate and key must be given together");
  }
  const interceptors: Interceptor[] = [retryReads(o.maxAttempts ?? 4)];
  if (o.token) {
    const token = o.token;
    interceptors.push((next) => (req) => {
      req.header.set("authorization", `Bearer ${token}`);
      return next(req);
    });
  }
  // One HTTP/2 session and transport per replica; the first is baseUrl's.
  const sessions = baseUrls.map((u) => new Http2SessionManager(u, { idleConnectionTimeoutMs: 60_000 }, {
    ca: o.ca, cert: o.cert, key: o.key, servername: o.serverName,
  }));
  const transports = baseUrls.map((u, i) => createGrpcTransport({
    baseUrl: u,
    defaultTimeoutMs: o.timeoutMs ?? 10_000,
    interceptors,
    sessionManager: sessions[i],
  }));
  const watchers = transports.map((t) => createClient(AutoscalerService, t));
  const autoscaler = watchers[0];
  const admin = createClient(AdminService, transports[0]);
  const fleet = createClient(FleetService, transports[0]);
  return {
    autoscaler,
    admin,
    fleet,
    async decide(req) {
      const resp = await autoscaler.recommend(req);
      if (!resp.decision) throw new ConnectError("recommend answered no decision", Code.Internal);
      return resp.decision;
    },
    async *targets(req = {}) {
      const page = create(ListTargetsRequestSchema, req);
      for (;;) {
        const resp = await autoscaler.listTargets(page);
        yield* resp.targets;
        if (!resp.nextPageToken) return;
        page.pageToken = resp.nextPageToken;
      }
    },
    async *fleets(req = {}) {
      const page = create(ListFleetsRequestSchema, req);
      for (;;) {
        const resp = await fleet.listFleets(page);
        yield* resp.fleets;
        if (!resp.nextPageToken) return;
        page.pageToken = resp.nextPageToken;
      }
    },
    async *changes(req = {}, signal) {
      const next = create(WatchRequestSchema, req);
      let backoff = 100;
      // The replica the stream is on; a broken stream resumes on the next.
      let on = 0;
      for (;;) {
        try {
          // The server names the revision the stream starts after (header
          // setpoint-revision): a reconnection resumes there even before any
          // change arrived.
          const onHeader = (h: Headers) => {
            const rev = h.get("setpoint-revision");
            if (rev !== null && next.resumeAfter === 0n) next.resumeAfter = BigInt(rev);
          };
          for await (const ch of watchers[on].watch(next, { signal, timeoutMs: 0, onHeader })) {
            backoff = 100;
            // Changes arrive in order: the last is where to resume. Sealed
            // resume points (callers that may not read every cluster) do not
            // grow, so they are passed back, never compared.
            next.resumeAfter = ch.revision;
            yield ch;
          }
        } catch (err) {
          if (signal?.aborted) return;
          const code = ConnectError.from(err).code;
          // A dropped connection surfaces as UNAVAILABLE, or as CANCELED
          // when HTTP/2 resets the stream; the caller did not cancel here.
          if (![Code.Unavailable, Code.Canceled, Code.Aborted, Code.ResourceExhausted, Code.Internal].includes(code)) throw err;
        }
        if (signal?.aborted) return;
        on = (on + 1) % watchers.length;
        // Back off once every replica has been tried.
        if (on === 0) {
          await sleep(backoff, signal);
          backoff = Math.min(2 * backoff, 5_000);
        }
      }
    },
    close() {
      for (const s of sessions) s.abort();
    },
  };
}

/** retryReads retries the idempotent unary reads answered UNAVAILABLE. */
function retryReads(maxAttempts: number): Interceptor {
  return (next) => async (req) => {
    if (req.stream || !retriedMethods.has(req.method.name)) return next(req);
    let backoff = 100;
    for (let attempt = 1; ; attempt++) {
      try {
        return await next(req);
      } catch (err) {
        if (attempt >= maxAttempts || ConnectError.from(err).code !== Code.Unavailable || req.signal.aborted) throw err;
      }
      await sleep(backoff * (0.8 + 0.4 * Math.random()), req.signal);
      backoff = Math.min(2 * backoff, 2_000);
    }
  };
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    signal?.addEventListener("abort", () => { clearTimeout(t); resolve(); }, { once: true });
  });
}

/**
 * The invalid fields an INVALID_ARGUMENT error names (field path →
 * description), read from its google.rpc.BadRequest detail; undefined for
 * any other error.
 */
export function fieldViolations(err: unknown): Map<string, string> | undefined {
  if (!(err instanceof ConnectError) || err.code !== Code.InvalidArgument) return undefined;
  let out: Map<string, string> | undefined;
  for (const d of err.details) {
    if (!("type" in d) || d.type !== "google.rpc.BadRequest" || !(d.value instanceof Uint8Array)) continue;
    // BadRequest { repeated FieldViolation field_violations = 1; }
    // FieldViolation { string field = 1; string description = 2; }
    const r = new BinaryReader(d.value);
    while (r.pos < r.len) {
      const [no, wt] = r.tag();
      if (no !== 1 || wt !== WireType.LengthDelimited) { r.skip(wt); continue; }
      const v = new BinaryReader(r.bytes());
      let field = "", description = "";
      while (v.pos < v.len) {
        const [n, w] = v.tag();
        if (n === 1 && w === WireType.LengthDelimited) field = v.string();
        else if (n === 2 && w === WireType.LengthDelimited) description = v.string();
        else v.skip(w);
      }
      (out ??= new Map()).set(field, description);
    }
  }
  return out;
}
