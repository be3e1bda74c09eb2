// The README's TypeScript integration, verbatim: test/client.test.ts runs
// it against a real server and checks that every line the README shows is
// here.
import { readFileSync } from "node:fs";
import { createSetpointClient } from "../src/index.js";

/** A dashboard lists a cluster's targets, then follows every rescale as it is decided. */
export async function followRescales(baseUrl: string, token: string, ca: string, cert: string, key: string, signal: AbortSignal, log: (line: string) => void) {
  const sp = createSetpointClient({
    baseUrl, // e.g. "https://setpoint.example:7443"
    ca: readFileSync(ca), cert: readFileSync(cert), key: readFileSync(key), // mutual TLS
    token, // and/or a bearer token
  });
  for await (const t of sp.targets({ cluster: "prod" })) {
    log(`${t.key?.namespace}/${t.key?.name}: ${t.status?.desiredReplicas} replicas`);
  }
  for await (const ch of sp.changes({ cluster: "prod" }, signal)) { // resumes by itself
    if (ch.change.case === "decision" && ch.change.value.rescale) {
      log(`${ch.target?.name}: → ${ch.change.value.desiredReplicas} replicas`);
    }
  }
  sp.close();
}
