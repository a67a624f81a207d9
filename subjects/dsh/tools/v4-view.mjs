#!/usr/bin/env node
// A diagnostic, NOT the subject: runs subjects/dsh/server.mjs (same arguments) and shows the
// headers in its answers the way a format-4 suite expects them (version 4, delegationDepth
// present, isSeeded), so that a run of the protocol-v1 suite shows what differs in DSH *besides*
// the v0 header. It exists to write FINDINGS.md; a certificate is never made through it.
//
//   node subjects/dsh/tools/v4-view.mjs [server.mjs arguments...]
//
// isSeeded is what the suite's model would say: true for a session created with a seed or by a
// fork; for a session this process did not create (a resume after a crash) whether the header
// has seedLength (docs/choices.md's reading of a v0 header).

import { spawn } from "node:child_process";
import { dirname, join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

const server = join(dirname(fileURLToPath(import.meta.url)), "..", "server.mjs");
const child = spawn(process.execPath, [server, ...process.argv.slice(2)], { stdio: ["pipe", "pipe", "inherit"] });
const pending = []; // requests in flight, in order
const seeded = new Map(); // session id -> whether it was created from a seed

function v4(header, id) {
  if (header === null || typeof header !== "object" || header.version !== 0) return header;
  const isSeeded = seeded.get(id) ?? header.seedLength !== undefined;
  return { ...header, version: 4, delegationDepth: header.delegationDepth ?? 0, isSeeded };
}

function rewrite(request, response) {
  if (!response.ok) return response;
  if (request.op === "reset") seeded.clear(); // a crash keeps what this process created
  const result = response.result;
  if (request.op === "create" && result?.id !== undefined) seeded.set(result.id, Array.isArray(request.seed));
  if (request.op === "fork" && result?.id !== undefined) seeded.set(result.id, true);
  if (["create", "fork", "state", "resume", "read"].includes(request.op) && result?.header !== undefined) {
    return { ...response, result: { ...result, header: v4(result.header, result.id ?? request.id) } };
  }
  return response;
}

createInterface({ input: child.stdout, crlfDelay: Infinity }).on("line", (line) => {
  const request = pending.shift() ?? {};
  let response;
  try {
    response = JSON.parse(line);
  } catch {
    process.stdout.write(line + "\n");
    return;
  }
  process.stdout.write(JSON.stringify(rewrite(request, response)) + "\n");
});

createInterface({ input: process.stdin, crlfDelay: Infinity })
  .on("line", (line) => {
    if (line.trim() === "") return;
    try {
      pending.push(JSON.parse(line));
    } catch {
      pending.push({});
    }
    child.stdin.write(line + "\n");
  })
  .on("close", () => child.stdin.end());

child.on("exit", (code) => process.exit(code ?? 1));
