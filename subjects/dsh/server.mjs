#!/usr/bin/env node
// The DSH subject: DSH's real, published session packages behind the conformance protocol
// (conformance/PROTOCOL.md; the reference's worked example is reference/server.py).
//
// One JSON request per line on stdin, one JSON response per line on stdout, diagnostics on stderr
// only. This code translates and never decides: every rule is DSH's own, in the packages that
// scripts/install-dsh.sh installs unmodified from the npm registry.
//
//   node subjects/dsh/server.mjs [--seam] [--invariants] [--release VERSION] [--dsh DIR]
//
//   --seam             storage runs on a simulated power-loss disk (capability crash-seam),
//                      substituted for node:fs under DSH's JSONL store only (lib/seam/hooks.mjs);
//                      also DSH_SUBJECT_SEAM=1
//   --invariants       the profile "DSH with invariants": DSH's optional invariant registry and the
//                      session and compaction companions enabled (lib/dsh.mjs); also
//                      DSH_SUBJECT_INVARIANTS=1
//   --release VERSION  the installed DSH release to drive (default 0.1.0-rc.8; .tools/dsh/VERSION)
//   --dsh DIR          drive the DSH packages installed in DIR (DIR/node_modules) instead
//
// Without --seam, file storage is the real file system: in CONFORMANCE_STORE_ROOT when that is
// set (the kill check's rules in PROTOCOL.md), else in a private temporary directory. With
// CONFORMANCE_STORE_ROOT set, --seam is ignored: the variable asks for the real file system.
// Needs Node >= 22.19 (DSH's zstd uses node:zlib); scripts/install-dsh.sh installs one.

import { writeSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

const HERE = dirname(fileURLToPath(import.meta.url));
const PROJECT = resolve(HERE, "..", "..");
const DEFAULT_RELEASE = "0.1.0-rc.8";

function parseArgs(argv) {
  const options = {
    seam: process.env.DSH_SUBJECT_SEAM === "1",
    invariants: process.env.DSH_SUBJECT_INVARIANTS === "1",
    release: DEFAULT_RELEASE,
    dsh: undefined,
  };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === "--seam") options.seam = true;
    else if (arg === "--invariants") options.invariants = true;
    else if (arg === "--release" && i + 1 < argv.length) options.release = argv[++i];
    else if (arg === "--dsh" && i + 1 < argv.length) options.dsh = resolve(argv[++i]);
    else fail(`unknown argument ${JSON.stringify(arg)}; usage: server.mjs [--seam] [--invariants] [--release VERSION] [--dsh DIR]`);
  }
  options.dsh ??= join(PROJECT, ".tools", "dsh", options.release);
  if (options.seam && process.env.CONFORMANCE_STORE_ROOT) {
    // The variable asks for the store on the real file system, in that directory (the kill check's
    // rules, which the files and trace families start a fresh process with): a simulated disk
    // cannot honour it, so the real file system wins and no crash seam is declared.
    process.stderr.write("dsh subject: CONFORMANCE_STORE_ROOT is set, so storage is the real file system there (--seam ignored)\n");
    options.seam = false;
  }
  return options;
}

function fail(message) {
  process.stderr.write(`dsh subject: ${message}\n`);
  process.exit(2);
}

function assertNodeVersion() {
  const [major, minor] = process.versions.node.split(".").map(Number);
  if (major < 22 || (major === 22 && minor < 19)) {
    fail(`Node ${process.versions.node} is too old: DSH's JSONL store needs Node >= 22.19 (run: bash scripts/install-dsh.sh --print-node)`);
  }
}

/** stdout carries protocol lines only: anything DSH or cordis logs goes to stderr. */
function keepStdoutForResponses() {
  for (const name of ["log", "info", "debug", "warn", "trace"]) console[name] = console.error;
}

function respond(response) {
  writeSync(1, JSON.stringify(response) + "\n");
}

async function main() {
  assertNodeVersion();
  keepStdoutForResponses();
  const options = parseArgs(process.argv.slice(2));
  let seam;
  if (options.seam) {
    // The hook must be installed before DSH's store is first imported.
    const { installSeam } = await import("./lib/seam/hooks.mjs");
    installSeam();
    const faces = await import("./lib/seam/fs-promises.mjs");
    const { PowerLossDisk } = await import("./lib/seam/disk.mjs");
    seam = { seam: faces.seam, PowerLossDisk };
  }
  const { loadDsh } = await import("./lib/dsh.mjs");
  const { DshSubject } = await import("./lib/subject.mjs");
  let dsh;
  try {
    dsh = await loadDsh(options.dsh, { invariants: options.invariants });
  } catch (error) {
    fail(error.message);
  }
  const storeRoot = options.seam ? undefined : process.env.CONFORMANCE_STORE_ROOT || undefined;
  const subject = new DshSubject(dsh, { seam, storeRoot });
  // A rejection DSH leaves unobserved in the background is logged, not fatal: the request that
  // caused it has already been answered, and the next one should still be.
  process.on("unhandledRejection", (reason) => process.stderr.write(`dsh subject: unobserved rejection: ${reason?.stack ?? reason}\n`));
  process.on("exit", () => subject.cleanup());
  await subject.start();
  const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
  for await (const line of lines) {
    if (line.trim() === "") continue;
    let request;
    try {
      request = JSON.parse(line);
    } catch (error) {
      respond({ rid: null, ok: false, error: { code: "BAD_REQUEST", message: `request is not JSON: ${error.message}` } });
      continue;
    }
    if (typeof request !== "object" || request === null || Array.isArray(request)) {
      respond({ rid: null, ok: false, error: { code: "BAD_REQUEST", message: "request must be a JSON object" } });
      continue;
    }
    respond(await subject.handle(request));
  }
}

main().catch((error) => {
  process.stderr.write(`dsh subject: ${error?.stack ?? error}\n`);
  process.exit(1);
});
