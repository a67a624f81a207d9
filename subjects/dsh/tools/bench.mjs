#!/usr/bin/env node
// DSH's side of the peer benchmark (`python -m scripts.bench --peer dsh`, scripts/bench_peer.py).
// NOT the conformance subject: it drives DSH's own published session packages (the ones
// scripts/install-dsh.sh installs, unmodified) the way DSH runs them: `SessionStore` of
// @deepseek-ai/dsh-session with `JsonlSessionPersistence` (zstd, DSH's defaults) in a cordis
// context. Each command prints one JSON line on stdout.
//
//   node subjects/dsh/tools/bench.mjs write ROOT EVENTS     a realistic log of about EVENTS events
//   node subjects/dsh/tools/bench.mjs resume ROOT RUNS      RUNS resumes (prepare + enter) in this process
//   node subjects/dsh/tools/bench.mjs restore ROOT          start-up + one resume, nothing printed
//   node subjects/dsh/tools/bench.mjs startup               start-up alone: the packages and a store
//   node subjects/dsh/tools/bench.mjs memory ROOT           resident growth of one resume
//   node subjects/dsh/tools/bench.mjs append ROOT EVENTS BATCH   replay EVENTS events, flush every BATCH
//
// Options (after the command's arguments): --dsh DIR (the installed release; default
// .tools/dsh/0.1.0-rc.8). The session is "bench" with cwd /work/bench, as in scripts/bench.py.
// The events' hash (sha256 of each event as canonical JSON: keys sorted, no spaces, one per line)
// is what scripts/bench_peer.py compares with the reference's, so both sides provably read the
// same events.

import { createHash } from "node:crypto";
import { existsSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const HERE = dirname(fileURLToPath(import.meta.url));
const PROJECT = resolve(HERE, "..", "..", "..");
const SESSION_ID = "bench";
const CWD = "/work/bench";
const FLUSH_EVERY = 100;

for (const name of ["log", "info", "debug", "warn", "trace"]) console[name] = console.error;

function optionsOf(argv) {
  const positional = [];
  let dsh = join(PROJECT, ".tools", "dsh", "0.1.0-rc.8");
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === "--dsh" && i + 1 < argv.length) dsh = resolve(argv[++i]);
    else positional.push(argv[i]);
  }
  return { positional, dsh };
}

/** Import `name` as installed under `modulesRoot`. */
async function importFrom(modulesRoot, name) {
  const manifest = join(modulesRoot, "node_modules", ...name.split("/"), "package.json");
  if (!existsSync(manifest)) throw new Error(`${name} is not installed in ${modulesRoot} (run: bash scripts/install-dsh.sh)`);
  const resolved = createRequire(join(modulesRoot, "package.json")).resolve(name);
  return import(pathToFileURL(resolved).href);
}

/** The packages a DSH restore needs: cordis, the session core and the JSONL store. */
async function loadPackages(modulesRoot) {
  const [cordis, session, jsonl] = await Promise.all([
    importFrom(modulesRoot, "@deepseek-ai/cordis"),
    importFrom(modulesRoot, "@deepseek-ai/dsh-session"),
    importFrom(modulesRoot, "@deepseek-ai/dsh-session-persistence-jsonl"),
  ]);
  return { cordis, session, jsonl };
}

/** A fresh DSH context: `SessionStore` and the JSONL store on `root` (zstd, DSH's defaults). */
async function openStore(dsh, root) {
  const ctx = new dsh.cordis.Context();
  await ctx.plugin(dsh.session.SessionStore);
  await ctx.plugin(dsh.jsonl.JsonlSessionPersistence, dsh.cordis.resolveConfig(dsh.jsonl.JsonlSessionPersistence, { root }));
  if (ctx.get("sessionPersistence") === undefined) throw new Error(`DSH's JSONL store did not start on ${root}`);
  return ctx;
}

/** Run `body(ctx)` in a fresh fiber that owns the session it makes (DSH's unit of ownership). */
async function owned(ctx, body) {
  let session;
  const fiber = ctx.plugin({ name: "bench-session", inject: ["sessions"], apply: (inner) => { session = body(inner); } });
  await fiber;
  if (session === undefined) throw new Error("the session fiber did not start");
  return { session, fiber };
}

/** DSH's resume: `sessionPersistence.prepare` (repair, closers, end-seed), then enter + announce. */
async function resume(ctx) {
  const preparation = await ctx.sessionPersistence.prepare(SESSION_ID);
  try {
    return await owned(ctx, (inner) => {
      inner.effect(function* () {
        yield inner.sessions.enter(preparation.session);
        inner.sessions.announce(preparation.session);
      }, "bench resume");
      return preparation.session;
    });
  } finally {
    preparation[Symbol.dispose]();
  }
}

async function close(ctx, live) {
  await ctx.sessions.flush(live.session);
  await live.fiber.dispose();
}

function canonical(value) {
  if (Array.isArray(value)) return `[${value.map(canonical).join(",")}]`;
  if (value !== null && typeof value === "object") {
    const keys = Object.keys(value).sort();
    return `{${keys.map((key) => `${JSON.stringify(key)}:${canonical(value[key])}`).join(",")}}`;
  }
  return JSON.stringify(value);
}

/** sha256 of the events as canonical JSON lines (scripts/bench_peer.py hashes the same way). */
function eventsHash(events) {
  const hash = createHash("sha256");
  for (const event of events) hash.update(canonical(event) + "\n", "utf8");
  return hash.digest("hex");
}

function cpuSeconds(start) {
  const used = process.cpuUsage(start);
  return (used.user + used.system) / 1e6;
}

// --- a realistic log ---------------------------------------------------------------------------

const WORDS = (
  "the file holds a function that reads config and returns values from the cache when present " +
  "otherwise it parses every line again checks each record and writes résumé notes for the next step of the plan"
).split(" ");

/** mulberry32: a small deterministic generator, so every run writes the same texts. */
function generator(seed) {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

class Prose {
  constructor(seed) {
    this.random = generator(seed);
  }
  int(low, high) {
    return low + Math.floor(this.random() * (high - low + 1));
  }
  text(low, high) {
    const target = this.int(low, high);
    const parts = [];
    let length = 0;
    while (length < target) {
      const word = WORDS[Math.floor(this.random() * WORDS.length)];
      parts.push(word);
      length += word.length + 1;
    }
    return parts.join(" ").slice(0, target);
  }
  /** A tool result's text: 200 B to 20 KB, log-uniform (most small, some large). */
  result() {
    const size = Math.round(200 * Math.pow(100, this.random()));
    return this.text(size, size);
  }
}

/** Whole turns, event by event, as [type, data, surface] for `session.append`: a prompt, three
 * steps (request context, four streamed text deltas, an assistant message; the first two call a
 * tool whose result is 200 B-20 KB), and a prune of a tool result from three turns back (its
 * `compaction/prune`, then the single-node replace), as scripts/bench.py's TurnWriter writes. */
function* turns(firstSeq) {
  const prose = new Prose(1);
  let seq = firstSeq;
  const results = new Map(); // turn -> [[seq, data]]
  const emit = (type, data, surface = undefined) => [type, data, surface, seq++];
  for (let turn = 1; ; turn++) {
    yield emit("turn/start", { turn });
    yield emit("user/message", { id: `u${turn}`, role: "user", source: { kind: "user" }, content: [{ type: "text", text: prose.text(300, 1000) }] }, { surfaceOp: "append" });
    for (const step of [1, 2, 3]) {
      yield emit("step/start", { turn, step });
      yield emit("request/context", { turn, step, tokens: 900 * step + turn });
      for (let index = 0; index < 4; index++) {
        yield emit("assistant/chunk", { turn, step, chunk: { type: "text-delta", index: 0, text: prose.text(10, 40) } });
      }
      const callId = `call-${turn}-${step}`;
      const content = [{ type: "text", text: prose.text(300, 1000) }];
      if (step < 3) content.push({ type: "tool-call", id: callId, name: "read_file", arguments: JSON.stringify({ path: `src/module_${turn % 97}.py`, limit: 200 }) });
      const message = { id: `a${turn}-${step}`, role: "assistant", content, source: { kind: "model", provider: "bench", model: "bench-1" }, usage: { input: 1200 * step, output: 300, cacheRead: 0.5 } };
      yield emit("assistant/message", { turn, step, message }, { surfaceOp: "append" });
      if (step < 3) {
        const call = seq;
        yield emit("tool/call", { turn, step, callId, name: "read_file" });
        const block = { type: "tool-result", toolCallId: callId, content: [{ type: "text", text: prose.result() }] };
        const data = { turn, step, message: { id: `r-${callId}`, role: "user", source: { kind: "tool", callId }, content: [block] } };
        const at = seq;
        yield emit("tool/result", data, { surfaceOp: "append", sourceEventSeqs: [call] });
        if (!results.has(turn)) results.set(turn, []);
        results.get(turn).push([at, data]);
      }
      yield emit("step/end", { turn, step });
    }
    const old = results.get(turn - 3);
    results.delete(turn - 3);
    if (old !== undefined) {
      const [at, data] = old[0];
      const block = data.message.content[0];
      const pruned = { ...block, content: [{ type: "text", text: "[pruned: 1 block]" }] };
      yield emit("compaction/prune", { shadowedRange: { start: at, end: at }, shadowedSeqs: [at], shadowedTokenCount: 150 });
      yield emit("tool/result", { ...data, message: { ...data.message, content: [pruned] } }, { surfaceOp: { op: "replace", start: at, end: at }, sourceEventSeqs: [at] });
    }
    yield emit("turn/end", { turn, reason: { kind: "completed" } });
  }
}

/** Append `[type, data, surface]` events, flushing every `every`; the last flush awaited too. */
async function appendAll(ctx, session, events, every) {
  let pending = 0;
  for (const [type, data, surface] of events) {
    if (surface === undefined) session.append(type, data);
    else session.append(type, data, surface);
    if (++pending >= every) {
      await ctx.sessions.flush(session);
      pending = 0;
    }
  }
  await ctx.sessions.flush(session);
}

// --- commands -----------------------------------------------------------------------------------

/** Write whole turns until about `events` events, close, then resume and close once (DSH writes
 * its end-seed then), so every later resume reads the same bytes and repairs nothing. */
async function write(dsh, root, events) {
  const ctx = await openStore(dsh, root);
  const live = await owned(ctx, (inner) => inner.sessions.create(SESSION_ID, { meta: { cwd: CWD } }));
  const wanted = [];
  for (const event of turns(live.session.events.length)) {
    wanted.push(event);
    if (event[3] >= events - 40 && event[0] === "turn/end") break;
  }
  await appendAll(ctx, live.session, wanted, FLUSH_EVERY);
  await close(ctx, live);
  await ctx.sessionPersistence.dispose?.();
  const again = await openStore(dsh, root);
  const resumed = await resume(again);
  const stored = resumed.session.events;
  const out = { events: stored.length, hash: eventsHash(stored), path: again.sessionPersistence.locate(resumed.session.header)?.path };
  await close(again, resumed);
  return out;
}

async function resumeRuns(dsh, root, runs) {
  const timings = [];
  let last;
  for (let run = 0; run < runs; run++) {
    const ctx = await openStore(dsh, root);
    globalThis.gc?.();
    const cpu = process.cpuUsage();
    const wall = performance.now();
    const live = await resume(ctx);
    timings.push({ cpu: cpuSeconds(cpu), wall: (performance.now() - wall) / 1e3 });
    last = live.session.events;
    await close(ctx, live);
  }
  return { timings, events: last.length, hash: eventsHash(last) };
}

async function memory(dsh, root) {
  const ctx = await openStore(dsh, root);
  globalThis.gc?.();
  const before = process.memoryUsage().rss;
  const live = await resume(ctx);
  globalThis.gc?.();
  const after = process.memoryUsage().rss;
  return { resident_bytes: after - before, events: live.session.events.length };
}

/** Replay `count` events of the stored log after its end (the same types, data and surface, seqs
 * in surface ops moved by the distance), flushing every `every`: the CPU of the appends + flushes. */
async function append(dsh, root, count, every) {
  const ctx = await openStore(dsh, root);
  const live = await resume(ctx);
  const stored = live.session.events;
  const events = replayOf(stored, count);
  globalThis.gc?.();
  const cpu = process.cpuUsage();
  const wall = performance.now();
  await appendAll(ctx, live.session, events, every);
  const timing = { cpu: cpuSeconds(cpu), wall: (performance.now() - wall) / 1e3 };
  await close(ctx, live);
  return { ...timing, events: events.length };
}

/** `count` events to append after the log's end: its whole turns (the first `turn/start` to the
 * last `turn/end`) again and again, with the same types, data and surface, every seq they name
 * moved to where the copy lands (scripts/bench_peer.py's `replay_of`). Plain copies, as a caller
 * hands fresh data to `append`. */
function replayOf(stored, count) {
  const first = stored.findIndex((event) => event.type === "turn/start");
  const last = stored.findLastIndex((event) => event.type === "turn/end");
  const turns = stored.slice(first, last + 1);
  const out = [];
  for (let cycle = 0; out.length < count; cycle++) {
    const shift = stored.length + cycle * turns.length - turns[0].seq;
    const moved = (seq) => seq + shift;
    for (const event of turns) {
      if (out.length === count) break;
      const surface = {};
      if (event.surfaceOp !== undefined) {
        surface.surfaceOp = typeof event.surfaceOp === "string" ? event.surfaceOp : { ...event.surfaceOp, start: moved(event.surfaceOp.start), end: moved(event.surfaceOp.end) };
      }
      if (event.sourceEventSeqs !== undefined) surface.sourceEventSeqs = event.sourceEventSeqs.map(moved);
      let data = structuredClone(event.data);
      if (event.type === "compaction/prune") {
        data = { ...data, shadowedRange: { start: moved(data.shadowedRange.start), end: moved(data.shadowedRange.end) }, shadowedSeqs: data.shadowedSeqs.map(moved) };
      }
      out.push([event.type, data, Object.keys(surface).length === 0 ? undefined : surface]);
    }
  }
  return out;
}

async function main() {
  const { positional, dsh: modulesRoot } = optionsOf(process.argv.slice(2));
  const [command, ...args] = positional;
  const dsh = await loadPackages(modulesRoot);
  let out;
  switch (command) {
    case "write":
      out = await write(dsh, resolve(args[0]), Number(args[1]));
      break;
    case "resume":
      out = await resumeRuns(dsh, resolve(args[0]), Number(args[1] ?? 1));
      break;
    case "restore": {
      const ctx = await openStore(dsh, resolve(args[0]));
      await resume(ctx);
      process.exit(0); // as a CLI that restored and is done: no teardown
      break;
    }
    case "startup":
      await openStore(dsh, resolve(args[0] ?? "."));
      process.exit(0);
      break;
    case "memory":
      out = await memory(dsh, resolve(args[0]));
      break;
    case "append":
      out = await append(dsh, resolve(args[0]), Number(args[1]), Number(args[2] ?? FLUSH_EVERY));
      break;
    default:
      throw new Error(`unknown command ${JSON.stringify(command)}; see the comment at the top of bench.mjs`);
  }
  process.stdout.write(JSON.stringify(out) + "\n");
  process.exit(0);
}

main().catch((error) => {
  process.stderr.write(`bench.mjs: ${error?.stack ?? error}\n`);
  process.exit(1);
});
