// Runs the TypeScript client against real Setpoint servers (the Go server,
// started by clients/ts/testserver) over loopback: plaintext with a token,
// and mutual TLS.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { fromJson, type JsonValue } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { createSetpointClient, RecommendRequestSchema, type SetpointClient } from "../src/index.js";

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

  it("gets INVALID_ARGUMENT for an invalid spec", async () => {
    const req = example("bad");
    req.spec!.maxReplicas = 0;
    await assert.rejects(sp.decide(req), (err) => ConnectError.from(err).code === Code.InvalidArgument);
  });

  it("gets NOT_FOUND for an unknown target", async () => {
    await assert.rejects(sp.autoscaler.getTarget({ target: { cluster: "dev", namespace: "shop", name: "nope" } }),
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

describe("mutual TLS", () => {
  const tlsClient = (withCert: boolean) => createSetpointClient({
    baseUrl: `https://${servers.tls}`,
    token,
    serverName: "setpoint.test",
    ca: readFileSync(join(servers.dir, "ca.pem")),
    ...(withCert ? { cert: readFileSync(join(servers.dir, "client.crt")), key: readFileSync(join(servers.dir, "client.key")) } : {}),
    maxAttempts: 1,
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
