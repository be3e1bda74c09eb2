// Runs the TypeScript client against real Setpoint servers (the Go server,
// started by clients/ts/testserver) over loopback: plaintext with a token,
// and mutual TLS.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { createConnection, createServer, type AddressInfo, type Server, type Socket } from "node:net";
import { fromJson, type JsonValue } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { createSetpointClient, fieldViolations, RecommendRequestSchema, type SetpointClient } from "../src/index.js";
import { followRescales } from "./readme.js";

const repo = join(import.meta.dirname, "..", "..", "..", ".."); // dist/test → repository root
const token = "s3cret";

interface Servers { plaintext: string; tls: string; dir: string }

let proc: ChildProcess;
let servers: Servers;
let sp: SetpointClient;

/** The README's example request: dev/shop/web, 2 pods at 87% cpu against 60%. */
function example(name = "web", cluster = "dev") {
  const json = JSON.parse(readFileSync(join(repo, "testdata/examples/recommend.json"), "utf8")) as JsonValue;
  const req = fromJson(RecommendRequestSchema, json);
  req.target!.name = name;
  req.target!.cluster = cluster;
  return req;
}

before(async () => {
  proc = spawn("go", ["run", "./clients/ts/testserver"], { cwd: repo, stdio: ["pipe", "pipe", "inherit"] });
  const exited = new Promise<never>((_, reject) => proc.once("exit", (code) => reject(new Error(`testserver exited with ${code}`))));
  const line = new Promise<string>((resolve) => createInterface({ input: proc.stdout! }).once("line", resolve));
  servers = JSON.parse(await Promise.race([line, exited])) as Servers;
  sp = createSetpointClient({ baseUrl: `http://${servers.plaintext}`, token });
});

after(() => {
  sp?.close();
  proc?.stdin?.end(); // the test server stops when its stdin closes
});

describe("plaintext with a bearer token", () => {
  it("decides the README example and reports the rescale", async () => {
    const d = await sp.decide(example());
    assert.equal(d.desiredReplicas, 3);
    assert.equal(d.rescale, true);
    const m = d.explanation!.metrics[0];
    assert.equal(m.proposal, 3);
    assert.ok(Math.abs(m.ratio - 1.45) < 1e-9, `ratio ${m.ratio}`);
    const active = d.status!.conditions.find((c) => c.type === "ScalingActive");
    assert.equal(active?.reason, "ValidMetricFound");

    const obs = await sp.autoscaler.observe({
      target: { cluster: "dev", namespace: "shop", name: "web" },
      decisionId: d.decisionId,
      change: { case: "applied", value: { from: 2, to: 3 } },
    });
    assert.equal(obs.status?.lastScaleTime?.seconds, BigInt(Date.UTC(2026, 2, 1, 12) / 1000));

    const { target } = await sp.autoscaler.getTarget({ target: { cluster: "dev", namespace: "shop", name: "web" } });
    assert.equal(target?.lastDecision?.decisionId, d.decisionId);
    assert.equal(target?.events[0]?.kind, "Applied");
  });

  it("iterates over every page of targets", async () => {
    for (const name of ["a", "b", "c"]) await sp.decide(example(name, "pages"));
    const names: string[] = [];
    for await (const t of sp.targets({ cluster: "pages", pageSize: 1 })) names.push(t.key!.name);
    assert.deepEqual(names, ["a", "b", "c"]);
  });

  it("simulates a what-if with a pod model, touching no target", async () => {
    const count = async () => { let n = 0; for await (const _ of sp.targets()) n++; return n; };
    const before = await count();
    const t0 = Date.UTC(2026, 2, 1, 12) / 1000;
    const resp = await sp.autoscaler.simulate({
      spec: {
        scaleTargetRef: { apiVersion: "apps/v1", kind: "Deployment", name: "web" },
        maxReplicas: 20,
        metrics: [{ type: "Resource", resource: { name: "cpu", target: { type: "Utilization", averageUtilization: 50 } } }],
      },
      podModel: { initialReplicas: 4, requests: { cpu: "1" } },
      steps: ["500m", "1", "1", "750m"].map((usage, i) => ({ time: { seconds: BigInt(t0 + 60 * i) }, metricValues: [usage] })),
    });
    assert.deepEqual(resp.steps.map((s) => s.decision?.desiredReplicas), [4, 8, 16, 20]);
    assert.deepEqual(resp.steps.map((s) => s.applied), [false, true, true, true]);
    assert.equal(await count(), before);
  });

  it("gets INVALID_ARGUMENT naming each invalid field", async () => {
    const req = example("bad");
    req.spec!.maxReplicas = 0;
    await assert.rejects(sp.decide(req), (err) => {
      assert.equal(ConnectError.from(err).code, Code.InvalidArgument);
      assert.deepEqual(fieldViolations(err), new Map([["spec.max_replicas", "must be >= 1, got 0"]]));
      return true;
    });
    assert.equal(fieldViolations(new ConnectError("gone", Code.NotFound)), undefined);
  });

  it("gets NOT_FOUND for an unknown target", async () => {
    await assert.rejects(sp.autoscaler.getTarget({ target: { cluster: "dev", namespace: "shop", name: "nope" } }),
      (err) => ConnectError.from(err).code === Code.NotFound);
  });

  it("puts a fleet, reports for a member and reads the split", async () => {
    const spec = example().spec!;
    for (const ns of ["fleet-a", "fleet-b", "fleet-c"]) {
      await sp.fleet.putFleet({
        fleet: { namespace: ns, name: "web" },
        spec: { autoscaler: spec, members: [{ cluster: "eu", weight: 2 }, { cluster: "us", weight: 1 }] },
      });
    }
    const names: string[] = [];
    for await (const f of sp.fleets({ pageSize: 1 })) names.push(`${f.key!.namespace}/${f.key!.name}`);
    assert.deepEqual(names.filter((n) => n.startsWith("fleet-")), ["fleet-a/web", "fleet-b/web", "fleet-c/web"]);

    // eu's agent reports the README example's 2 pods at 87% against 60%:
    // the fleet's first decision, over eu alone, is 3 replicas, all eu's.
    const req = example();
    const resp = await sp.fleet.report({
      fleet: { namespace: "fleet-a", name: "web" },
      report: { member: "eu", scale: req.scale, pods: req.pods, resourceMetrics: req.resourceMetrics, observations: req.observations },
    });
    assert.equal(resp.decided, true);
    assert.equal(resp.total, 3);
    assert.equal(resp.share?.replicas, 3);
    assert.equal(resp.share?.message, "weight 2 of 2: quota 3×2/2 = 3");
    const { fleet } = await sp.fleet.getFleet({ fleet: { namespace: "fleet-a", name: "web" } });
    assert.deepEqual(fleet!.split!.shares.map((s) => `${s.member} ${s.replicas} ${s.reason}${s.exclusion}`), ["eu 3 Weighted", "us 0 ExcludedNoReport"]);
    assert.deepEqual(fleet!.members.map((m) => `${m.member} ${m.pooled}`), ["eu true", "us false"]);

    await sp.fleet.deleteFleet({ fleet: { namespace: "fleet-b", name: "web" } });
    await assert.rejects(sp.fleet.getFleet({ fleet: { namespace: "fleet-b", name: "web" } }),
      (err) => ConnectError.from(err).code === Code.NotFound);
  });

  it("is UNAUTHENTICATED without a token", async () => {
    const anon = createSetpointClient({ baseUrl: `http://${servers.plaintext}` });
    try {
      await assert.rejects(anon.autoscaler.listTargets({}), (err) => ConnectError.from(err).code === Code.Unauthenticated);
    } finally {
      anon.close();
    }
  });

  it("refuses to send a token in plaintext off loopback", () => {
    assert.throws(() => createSetpointClient({ baseUrl: "http://setpoint.example:7443", token }), /plaintext/);
  });
});

/** A TCP proxy to the server that can drop every connection and refuse new ones. */
async function startProxy(target: string) {
  const [host, port] = [target.slice(0, target.lastIndexOf(":")), Number(target.slice(target.lastIndexOf(":") + 1))];
  const sockets = new Set<Socket>();
  let down = false;
  const server: Server = createServer((inbound) => {
    if (down) return inbound.destroy();
    const outbound = createConnection({ host, port });
    for (const s of [inbound, outbound]) {
      sockets.add(s);
      s.on("close", () => sockets.delete(s));
      s.on("error", () => {});
    }
    inbound.pipe(outbound).pipe(inbound);
    inbound.on("close", () => outbound.destroy());
    outbound.on("close", () => inbound.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    addr: `127.0.0.1:${(server.address() as AddressInfo).port}`,
    partition(on: boolean) {
      down = on;
      if (on) for (const s of sockets) s.destroy();
    },
    close() {
      this.partition(true);
      server.close();
    },
  };
}

describe("watch", () => {
  it("follows decisions and resumes across a partition without missing one", async () => {
    const proxy = await startProxy(servers.plaintext);
    const watcher = createSetpointClient({ baseUrl: `http://${proxy.addr}`, token });
    const abort = new AbortController();
    const seen: { rev: bigint; id: string }[] = [];
    const follow = (async () => {
      for await (const ch of watcher.changes({ cluster: "live" }, abort.signal)) {
        if (ch.change.case === "decision") seen.push({ rev: ch.revision, id: ch.change.value.decisionId });
      }
    })();
    const until = async (cond: () => boolean, what: string) => {
      for (let i = 0; i < 300 && !cond(); i++) await new Promise((r) => setTimeout(r, 20));
      assert.ok(cond(), `timed out waiting for ${what}; seen ${JSON.stringify(seen.map((s) => s.id))}`);
    };
    try {
      // Until the watch is up, decisions pass unseen: decide until one is seen.
      for (let i = 0; i < 100 && seen.length === 0; i++) {
        await sp.decide(example("web", "live"));
        await new Promise((r) => setTimeout(r, 30));
      }
      await until(() => seen.length > 0, "the first change");
      await new Promise((r) => setTimeout(r, 200));
      const before = seen.length;

      proxy.partition(true);
      const missed = [(await sp.decide(example("api", "live"))).decisionId, (await sp.decide(example("worker", "live"))).decisionId];
      await new Promise((r) => setTimeout(r, 300));
      proxy.partition(false);

      await until(() => seen.length >= before + 2, "the decisions made during the partition");
      assert.deepEqual(seen.slice(before).map((s) => s.id), missed);
      for (let i = 1; i < seen.length; i++) assert.ok(seen[i].rev > seen[i - 1].rev, "revisions increase");
    } finally {
      abort.abort();
      watcher.close();
      proxy.close();
    }
    await follow; // ends without an error once aborted
  });
});

describe("watch across replicas", () => {
  it("moves to the next replica when its stream breaks, missing nothing", async () => {
    // Two addresses of one service: a proxy that goes down for good, and
    // the server itself. Without replicas the stream would wait for the
    // proxy; with them it resumes on the next at once.
    const proxy = await startProxy(servers.plaintext);
    const watcher = createSetpointClient({ baseUrl: `http://${proxy.addr}`, replicas: [`http://${servers.plaintext}`], token });
    const abort = new AbortController();
    const seen: string[] = [];
    const follow = (async () => {
      for await (const ch of watcher.changes({ cluster: "replicas" }, abort.signal)) {
        if (ch.change.case === "decision") seen.push(ch.change.value.decisionId);
      }
    })();
    const until = async (cond: () => boolean, what: string) => {
      for (let i = 0; i < 300 && !cond(); i++) await new Promise((r) => setTimeout(r, 20));
      assert.ok(cond(), `timed out waiting for ${what}; seen ${JSON.stringify(seen)}`);
    };
    try {
      for (let i = 0; i < 100 && seen.length === 0; i++) {
        await sp.decide(example("web", "replicas"));
        await new Promise((r) => setTimeout(r, 30));
      }
      await until(() => seen.length > 0, "the first change");
      await new Promise((r) => setTimeout(r, 200));
      const before = seen.length;

      proxy.partition(true); // and never back
      const missed = [(await sp.decide(example("api", "replicas"))).decisionId, (await sp.decide(example("worker", "replicas"))).decisionId];
      await until(() => seen.length >= before + 2, "the decisions made after the first replica went down");
      assert.deepEqual(seen.slice(before), missed);
    } finally {
      abort.abort();
      watcher.close();
      proxy.close();
    }
    await follow;
  });

  it("refuses a token in plaintext to any replica off loopback", () => {
    assert.throws(() => createSetpointClient({ baseUrl: `http://${servers.plaintext}`, replicas: ["http://setpoint.example:7443"], token }), /plaintext/);
  });
});

describe("mutual TLS", () => {
  const tlsClient = (withCert: boolean) => createSetpointClient({
    baseUrl: `https://${servers.tls}`,
    token,
    serverName: "setpoint.test",
    ca: readFileSync(join(servers.dir, "ca.pem")),
    ...(withCert ? { cert: readFileSync(join(servers.dir, "client.crt")), key: readFileSync(join(servers.dir, "client.key")) } : {}),
    maxAttempts: 1,
  });

  it("runs the README integration", async () => {
    const agent = tlsClient(true);
    const abort = new AbortController();
    const lines: string[] = [];
    try {
      await agent.decide(example("api", "prod"));
      const follow = followRescales(`https://${servers.tls}`, token, join(servers.dir, "ca.pem"),
        join(servers.dir, "client.crt"), join(servers.dir, "client.key"), abort.signal, (l) => {
          lines.push(l);
          if (l.startsWith("web:")) abort.abort();
        });
      for (let i = 0; i < 200 && lines.length === 0; i++) await new Promise((r) => setTimeout(r, 10)); // the listing is done
      for (let i = 0; i < 200 && !abort.signal.aborted; i++) { // an agent in cluster prod, until a rescale is seen
        await agent.decide(example("web", "prod"));
        await new Promise((r) => setTimeout(r, 30));
      }
      await follow;
    } finally {
      abort.abort();
      agent.close();
    }
    assert.deepEqual(lines, ["shop/api: 3 replicas", "web: → 3 replicas"]);
  });

  it("shows in the README only lines the test runs", () => {
    const readme = readFileSync(join(repo, "README.md"), "utf8");
    const block = /```ts\n([\s\S]*?)```/.exec(readme)?.[1];
    assert.ok(block, "the README has a ts block");
    const source = new Set(readFileSync(join(repo, "clients/ts/test/readme.ts"), "utf8").split("\n").map((l) => l.trim()));
    const imports = /^import .* from "@setpointhq\/setpoint-client";$/;
    for (const line of block.split("\n").map((l) => l.trim()).filter((l) => l !== "")) {
      assert.ok(source.has(line) || imports.test(line), `README line not in clients/ts/test/readme.ts: ${line}`);
    }
    assert.ok(block.split("\n").length < 20, "the README integration is under 20 lines");
  });

  it("calls with a client certificate", async () => {
    const c = tlsClient(true);
    try {
      const d = await c.decide(example());
      assert.equal(d.desiredReplicas, 3);
    } finally {
      c.close();
    }
  });

  it("fails without a client certificate", async () => {
    const c = tlsClient(false);
    try {
      await assert.rejects(c.autoscaler.listTargets({}), (err) => err instanceof ConnectError);
    } finally {
      c.close();
    }
  });
});
