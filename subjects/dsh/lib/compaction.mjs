// The protocol's summary compaction, overflow recovery and durability checkpoint ops (capabilities
// `compaction`, `overflow`, `checkpoint`; conformance/PROTOCOL.md, "Engine ops"), driven through
// DSH's published packages as a host plugs them:
// - @deepseek-ai/dsh-compaction-basic's `BasicCompactionEngine`, plugged with the op's `policy` as
//   its configuration (its `Config` schema applied by cordis, as DSH's loader does), with DSH's
//   own token meter and, when the op gives `prune`, DSH's tool-result pruner service plugged beside
//   it with that configuration. `compact` is `compactNow` (the manual command), `compact_region`
//   is `compactRegion`, `compact_if_needed` is `compactIfNeeded`, `overflow` is the engine's own
//   `agent/request-error` listener and `overflow_reset` its `agent/status` idle listener;
// - @deepseek-ai/dsh-session-checkpoint-policy, plugged as its `apply`: `checkpoint` runs the
//   waterfall its moment names (`llm/stream`, `tools/execute`, `agent/pre-step`) to its end.
//
// The engine lives in a context of its own (the session store's context holds the projection
// registry, where a token meter would register its own units). What DSH's engine reads from a host
// is stood in: `sessions` (the subject's store, for the manual command's flush), `llm` (only its
// `resolveModelInfo`, answering the op's `contextWindow`), and an agent (`session`, no `options`,
// `runMaintenance` running the body at once).
//
// The scripted summarizer is the engine's documented customization hook, `summarize` (index.js
// :840-844): a subclass answers each attempt as PROTOCOL.md scripts it, from provider "script" and
// model "scripted". Its `blocks` answer is filtered as DSH's own summarizer filters a model's
// blocks (`summaryText`, index.js:353-356, with dsh-llm's `contentHasImage` and `LlmError`). The
// attempt's `compactionId` is the id DSH mints (`randomUUID` of node:crypto, index.js:431): the
// suite scripts it as it scripts the clock.

import crypto from "node:crypto";
import { syncBuiltinESMExports } from "node:module";
import { BadRequest, pruneConfig, validatedConfig } from "./pure.mjs";

// DSH mints a bracket's compactionId with node:crypto's randomUUID (dsh-compaction-basic index.js
// :431) and the checkpoint message's id with the global crypto's (dsh-llm createMessage, index.js
// :168): while an op runs, the first gives the next attempt's compactionId, the second the id of
// the attempt that bracket runs (PROTOCOL.md: the id of the bracket and of the checkpoint message).
const mintUuid = crypto.randomUUID.bind(crypto);
let scriptedIds = []; // the compactionIds of the running op's attempts not yet started, in order
let runningId; // the compactionId of the attempt whose bracket is open
crypto.randomUUID = (...args) => {
  if (scriptedIds.length === 0) return mintUuid(...args);
  runningId = scriptedIds.shift();
  return runningId;
};
syncBuiltinESMExports();
const mintGlobalUuid = globalThis.crypto.randomUUID.bind(globalThis.crypto);
globalThis.crypto.randomUUID = () => runningId ?? mintGlobalUuid();

const OUTCOMES = ["text", "blocks", "fail", "timeout", "cancel"];

/** One attempt as PROTOCOL.md scripts it, or BAD_REQUEST. */
function attemptOf(value) {
  const ok =
    typeof value === "object" && value !== null && !Array.isArray(value) && typeof value.compactionId === "string" && value.compactionId.length > 0;
  if (!ok) throw new BadRequest("an attempt must be an object with a non-empty compactionId");
  const outcomes = ["text", "blocks", "fail", "timeout"].filter((key) => Object.hasOwn(value, key));
  const during = value.cancel === "during";
  if (outcomes.length + (during ? 1 : 0) !== 1) throw new BadRequest("an attempt has exactly one outcome");
  if (Object.hasOwn(value, "text") && typeof value.text !== "string") throw new BadRequest("text must be a string");
  if (Object.hasOwn(value, "blocks") && !Array.isArray(value.blocks)) throw new BadRequest("blocks must be an array");
  if (Object.hasOwn(value, "fail") && typeof value.fail !== "string") throw new BadRequest("fail must be a string");
  if (Object.hasOwn(value, "timeout") && !(Number.isSafeInteger(value.timeout) && value.timeout >= 1)) throw new BadRequest("timeout must be whole seconds >= 1");
  if (Object.hasOwn(value, "cancel") && !["during", "after"].includes(value.cancel)) throw new BadRequest('cancel must be "during" or "after"');
  if (value.cancel === "after" && outcomes[0] !== "text" && outcomes[0] !== "blocks") throw new BadRequest('cancel "after" needs text or blocks');
  for (const key of Object.keys(value)) {
    if (!["compactionId", "append", ...OUTCOMES].includes(key)) throw new BadRequest(`an attempt has no key ${JSON.stringify(key)}`);
  }
  return value;
}

function attemptsOf(value) {
  if (!Array.isArray(value)) throw new BadRequest("attempts must be an array");
  return value.map(attemptOf);
}

export class DshCompaction {
  /** @param dsh - the loaded DSH modules (dsh.mjs) */
  constructor(dsh) {
    this.dsh = dsh;
    this.agents = new WeakMap(); // session -> its agent (the overflow count is keyed by it)
    this.engines = new Map(); // policy (JSON) -> a plugged engine
  }

  get capabilities() {
    const { basic, tokenMeter, checkpointPolicy } = this.dsh;
    const capabilities = [];
    if (basic !== undefined && tokenMeter !== undefined) capabilities.push("compaction", "overflow");
    if (checkpointPolicy !== undefined) capabilities.push("checkpoint");
    return capabilities;
  }

  /** A fresh store context: the engine's context starts over beside it (every count forgotten).
   * Both are plugged at the first op that needs them, so a reset costs nothing more. */
  async attach(storeCtx) {
    this.storeCtx = storeCtx;
    this.ctx = undefined;
    this.policyPlugged = false;
    this.engines = new Map();
    this.agents = new WeakMap();
  }

  /** The engine's context: DSH's token meter and the stand-ins for the host's services. */
  async engineContext() {
    if (this.ctx !== undefined) return this.ctx;
    const { cordis, tokenMeter } = this.dsh;
    const storeCtx = this.storeCtx;
    const subject = this;
    const ctx = new cordis.Context();
    await ctx.plugin(standIn(cordis, "sessions", { flush: (session) => storeCtx.sessions.flush(ROUTED.get(session) ?? session) }));
    await ctx.plugin(standIn(cordis, "llm", { resolveModelInfo: async () => ({ context: subject.contextWindow === undefined ? undefined : { contextWindow: subject.contextWindow } }) }));
    await ctx.plugin(tokenMeter.TokenMeter);
    this.ctx = ctx;
    return ctx;
  }

  /** The checkpoint policy, plugged into the store's context. It joins the model, tool, session and
   * persistence services: stand-ins for the two the subject has no host for (their waterfalls are
   * run by the checkpoint op). Without storage there is no persistence service and DSH's policy
   * does not start. */
  async plugCheckpointPolicy() {
    if (this.policyPlugged || this.storeCtx.get("sessionPersistence") === undefined) return;
    const { cordis, checkpointPolicy } = this.dsh;
    await this.storeCtx.plugin(standIn(cordis, "llm", {}));
    await this.storeCtx.plugin(standIn(cordis, "tools", {}));
    await this.storeCtx.plugin(checkpointPolicy);
    this.policyPlugged = true;
  }

  /** The agent DSH's engine is handed for a session: one per live session. */
  agentOf(session) {
    let agent = this.agents.get(session);
    if (agent === undefined) {
      agent = { session: routed(session), options: {}, runMaintenance: (body) => body(new AbortController().signal) };
      this.agents.set(session, agent);
    }
    return agent;
  }

  /** The engine plugged with `policy` (validated by its Config schema, then its constructor). DSH
   * loads one engine per context: another policy replaces it (its overflow counts with it). */
  async engine(policy) {
    const key = JSON.stringify(policy ?? null);
    if (this.engines.has(key)) return this.engines.get(key);
    for (const entry of this.engines.values()) await entry.fiber.dispose();
    this.engines.clear();
    const { basic, cordis } = this.dsh;
    const script = { attempts: [], controller: undefined, llm: this.dsh.llm };
    class ScriptedEngine extends basic.BasicCompactionEngine {
      async summarize(_input, agent, signal) {
        return scriptedSummary(script, agent.session, signal);
      }
    }
    const config = validatedConfig(cordis, ScriptedEngine, policy ?? undefined, "COMPACTION_CONFIG_INVALID");
    let engine;
    const fiber = (await this.engineContext()).plugin({
      name: "protocol-compaction",
      inject: ["llm", "tokenMeter", "sessions"],
      apply: (ctx) => {
        try {
          engine = new ScriptedEngine(ctx, config);
        } catch (error) {
          engine = error;
        }
      },
    });
    await fiber;
    if (engine instanceof Error) {
      await fiber.dispose();
      throw Object.assign(new Error(engine.message), { protocolCode: "COMPACTION_CONFIG_INVALID" });
    }
    const entry = { engine, script, ctx: engine.ctx, fiber };
    this.engines.set(key, entry);
    return entry;
  }

  /** Run `body` with the op's attempts scripted, its signal, and the pruner when `prune` is given. */
  async run(entry, attempts, prune, body) {
    const controller = new AbortController();
    entry.script.attempts = [...attempts];
    entry.script.controller = controller;
    scriptedIds = attempts.map((attempt) => attempt.compactionId);
    let pruner;
    if (prune !== undefined) {
      const config = pruneConfig(this.dsh, prune);
      pruner = this.ctx.plugin(this.dsh.pruner.ToolResultPruner, config);
      await pruner;
    }
    try {
      return await body(controller);
    } finally {
      scriptedIds = [];
      runningId = undefined;
      entry.script.attempts = [];
      if (pruner !== undefined) await pruner.dispose();
    }
  }

  async compact(session, request) {
    const attempt = attemptOf(request.attempt);
    if (Object.hasOwn(request, "sourceCommandId") && typeof request.sourceCommandId !== "string") throw new BadRequest("sourceCommandId must be a string");
    const entry = await this.engine(undefined);
    const result = await this.run(entry, [attempt], undefined, (controller) =>
      entry.engine.compactNow(this.agentOf(session), controller.signal, request.sourceCommandId),
    );
    return result;
  }

  async compactRegion(session, request) {
    if (!Number.isSafeInteger(request.start) || !Number.isSafeInteger(request.end)) throw new BadRequest("start and end must be seqs");
    const attempt = attemptOf(request.attempt);
    const entry = await this.engine(undefined);
    return this.run(entry, [attempt], undefined, (controller) =>
      entry.engine.compactRegion(request.start, request.end, this.agentOf(session), controller.signal),
    );
  }

  async compactIfNeeded(session, request) {
    const trigger = request.trigger ?? "pressure";
    if (trigger !== "pressure" && trigger !== "context-overflow") throw new BadRequest('trigger must be "pressure" or "context-overflow"');
    const attempts = attemptsOf(request.attempts);
    this.contextWindow = request.contextWindow ?? undefined;
    const entry = await this.engine(request.policy);
    const prune = Object.hasOwn(request, "prune") ? request.prune : undefined;
    return this.run(entry, attempts, prune, (controller) => entry.engine.compactIfNeeded(this.agentOf(session), trigger, controller.signal));
  }

  async overflow(session, request) {
    const attempt = attemptOf(request.attempt);
    const code = request.code ?? "CONTEXT_WINDOW_EXCEEDED";
    if (typeof code !== "string") throw new BadRequest("code must be a string");
    const entry = await this.engine(request.policy);
    const prune = Object.hasOwn(request, "prune") ? request.prune : undefined;
    const agent = this.agentOf(session);
    const answer = await this.run(entry, [attempt], prune, (controller) =>
      entry.ctx.waterfall("agent/request-error", { agent, failure: { code, message: code }, signal: controller.signal }, () => ({ kind: "fail" })),
    );
    const retries = entry.engine.overflowRetries.get(agent) ?? 0;
    return { retry: answer?.kind === "retry", retries };
  }

  async overflowReset(session) {
    const agent = this.agentOf(session);
    for (const { ctx } of this.engines.values()) ctx.emit("agent/status", { agent, status: "idle" });
    return null;
  }

  /** `checkpoint`: the waterfall the moment names, run to its end, then `then` appended. */
  async checkpoint(session, request) {
    const moment = request.moment;
    if (!["model-request", "tool", "pre-step"].includes(moment)) throw new BadRequest('moment must be "model-request", "tool" or "pre-step"');
    const then = request.then ?? undefined;
    if (then !== undefined && (typeof then !== "object" || Array.isArray(then))) throw new BadRequest("then must be an append");
    await this.plugCheckpointPolicy();
    const ctx = this.storeCtx;
    try {
      if (moment === "model-request") {
        const stream = ctx.waterfall("llm/stream", { sessionId: session.id }, () => (async function* () {})());
        for await (const _chunk of stream);
      } else if (moment === "tool") {
        const signal = new AbortController().signal;
        await ctx.waterfall("tools/execute", { agent: { session }, signal }, async () => ({ content: [] }));
      } else {
        await ctx.waterfall("agent/pre-step", { agent: { session }, signal: new AbortController().signal }, async () => undefined);
      }
    } catch (error) {
      throw Object.assign(new Error(`durability checkpoint failed: ${error?.message ?? error}`, { cause: error }), { protocolCode: "DURABILITY_CHECKPOINT_FAILED" });
    }
    if (then === undefined) return null;
    const surface = {};
    if (Object.hasOwn(then, "surfaceOp")) surface.surfaceOp = then.surfaceOp;
    if (Object.hasOwn(then, "sourceEventSeqs")) surface.sourceEventSeqs = then.sourceEventSeqs;
    return session.append(then.type, then.data, surface);
  }
}

/** The route a host's agent has taken when the log names none: the scripted summarizer's. */
const SCRIPTED_ROUTE = { provider: "script", model: "scripted" };

/** The session as DSH's engine sees it in a host that has routed a model request. DSH's engine
 * acts only for a session whose log names the routed model (`routedTarget`, index.js:696-704:
 * `requestHeader().config`), which a host's agent writes before its first request; the suite's
 * sessions write no request header, and the op's `contextWindow` stands for that model's. So a
 * session whose log routes no model is seen as routed to the scripted one; nothing else differs,
 * and every call reaches the live session itself. */
function routed(session) {
  const proxy = new Proxy(session, {
    get(target, key) {
      if (key === "requestHeader") {
        return () => {
          const header = target.requestHeader();
          return header?.config === undefined ? { ...header, config: SCRIPTED_ROUTE } : header;
        };
      }
      const value = Reflect.get(target, key, target);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
  ROUTED.set(proxy, session);
  return proxy;
}

/** The live session a routed view stands for (the store knows sessions by identity). */
const ROUTED = new WeakMap();

/** A cordis service named `name` with `methods`: a host's service the subject stands in for. */
function standIn(cordis, name, methods) {
  const StandIn = class extends cordis.Service {
    constructor(ctx) {
      super(ctx, name);
      Object.assign(this, methods);
    }
  };
  Object.defineProperty(StandIn, "name", { value: `StandIn(${name})` });
  return StandIn;
}

/** The scripted summarizer's answer for the running attempt (PROTOCOL.md, The scripted summarizer). */
async function scriptedSummary(script, session, signal) {
  const attempt = script.attempts.shift();
  if (attempt === undefined) throw new Error("the summarizer was called more often than the op scripted");
  const controller = script.controller;
  if (attempt.append !== undefined) {
    const { type, data } = attempt.append;
    const surface = {};
    if (Object.hasOwn(attempt.append, "surfaceOp")) surface.surfaceOp = attempt.append.surfaceOp;
    if (Object.hasOwn(attempt.append, "sourceEventSeqs")) surface.sourceEventSeqs = attempt.append.sourceEventSeqs;
    try {
      session.append(type, data, surface);
    } catch {
      // a refused append changes nothing
    }
  }
  if (attempt.cancel === "during") {
    controller.abort();
    signal?.throwIfAborted();
    throw controller.signal.reason;
  }
  if (Object.hasOwn(attempt, "fail")) throw Object.assign(new Error(attempt.fail), { protocolCode: "COMPACTION_SUMMARY_FAILED" });
  if (Object.hasOwn(attempt, "timeout")) {
    throw Object.assign(new Error(`summarization timed out after ${attempt.timeout} s`), { name: "TimeoutError" });
  }
  const blocks = Object.hasOwn(attempt, "text") ? [{ type: "text", text: attempt.text }] : attempt.blocks;
  const { contentHasImage, LlmError } = script.llm;
  if (contentHasImage(blocks)) throw new LlmError("compaction summary cannot contain image output", "UNSUPPORTED_CONTENT");
  const summary = blocks.filter((block) => block?.type === "text");
  if (!summary.some((block) => typeof block.text === "string" && block.text.trim().length > 0)) throw new Error("summarization produced no text summary content");
  if (attempt.cancel === "after") controller.abort();
  return { summary, provider: "script", model: "scripted" };
}
