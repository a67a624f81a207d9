// The protocol's spill ops (capability `spill`; conformance/PROTOCOL.md, "Spill"), driven through
// @deepseek-ai/dsh-spill-policy as a host plugs it: its `apply` with its configuration (its
// `Config` schema applied by cordis, as DSH's loader does), beside a `spillStore` service
// (@deepseek-ai/dsh-spill's `SpillStore`) that is the protocol's in-memory store, and a stand-in for
// the tool registry whose `tools/post-execute` waterfall the policy transforms. `spill` runs that
// waterfall for the tool result and appends the `tool/result` with the content the policy kept.
//
// DSH's policy bounds a result's UTF-8 bytes (`maxInlineBytes`, dsh-spill-policy lib/index.js:52,
// :85-87, :142); the protocol's limit is estimated tokens (`maxInlineTokens`). DSH has no token limit,
// so the protocol's number is DSH's only limit as it is given (absent: the protocol's base 12500;
// null: the policy is not plugged, DSH's "omitted: a true no-op").

import { createHash } from "node:crypto";
import { BadRequest, validatedConfig } from "./pure.mjs";

const BASE_MAX_INLINE = 12500; // spec.shrink.spill.BASE_MAX_INLINE_TOKENS
const RETRIEVAL_HINT = "Use read with offset/limit, or grep this path to search within it."; // SPILL_RETRIEVAL_HINT

/** spec.shrink.spill.derive_memory_spill_locator: the protocol's store names its n-th text so. */
function memoryLocator(sessionId, count, suggestedName) {
  const dir = `session-${createHash("sha256").update(sessionId, "utf8").digest("hex").slice(0, 12)}`;
  const segment = encodeSegment(suggestedName);
  return `memory://spill/${dir}/${count.toString(16).padStart(12, "0")}-${segment}`;
}

/** spec.format.naming.encode_segment (D1, DSH's own encodePathSegment): one safe path segment. */
function encodeSegment(name) {
  if (name === ".") return "~002E";
  if (name === "..") return "~002E~002E";
  let out = "";
  for (let i = 0; i < name.length; i++) {
    const unit = name.charCodeAt(i);
    out += /[A-Za-z0-9._-]/.test(name[i]) ? name[i] : `~${unit.toString(16).toUpperCase().padStart(4, "0")}`;
  }
  return out;
}

export class DshSpill {
  /** @param dsh - the loaded DSH modules (dsh.mjs) */
  constructor(dsh) {
    this.dsh = dsh;
    this.saved = new Map(); // locator -> text: the protocol's in-memory spill store
    this.count = 0;
    this.contexts = new Map(); // the limit (JSON) -> a context with the policy plugged
    this.failNextSave = false;
  }

  get capabilities() {
    return this.dsh.spillPolicy !== undefined && this.dsh.spill !== undefined ? ["spill"] : [];
  }

  /** `reset` forgets every saved text; `crash` keeps them (the store is the subject's). */
  forget() {
    this.saved = new Map();
    this.count = 0;
  }

  /** The context with DSH's policy plugged at `limit`. */
  async contextFor(limit) {
    const key = JSON.stringify(limit);
    if (this.contexts.has(key)) return this.contexts.get(key);
    const { cordis, spillPolicy, spill } = this.dsh;
    const subject = this;
    const ctx = new cordis.Context();
    class Tools extends cordis.Service {
      constructor(ctx) {
        super(ctx, "tools");
      }
    }
    class ProtocolSpillStore extends spill.SpillStore {
      async saveText(save) {
        if (subject.failNextSave) throw Object.assign(new Error("the spill store failed (storeFails)"), { code: "EIO" });
        subject.count += 1;
        const locator = memoryLocator(save.owner.sessionId, subject.count, save.suggestedName);
        subject.saved.set(locator, save.content);
        return { locator, bytes: Buffer.byteLength(save.content, "utf8"), retrievalHint: RETRIEVAL_HINT };
      }
    }
    await ctx.plugin(Tools);
    await ctx.plugin(ProtocolSpillStore);
    if (limit !== null) {
      const config = validatedConfig(cordis, spillPolicy, { maxInlineBytes: limit }, "SPILL_CONFIG_INVALID");
      let refused;
      const fiber = ctx.plugin({
        name: "protocol-spill-policy",
        inject: ["tools"],
        apply: (inner) => {
          try {
            spillPolicy.apply(inner, config);
          } catch (error) {
            refused = error;
          }
        },
      });
      await fiber;
      if (refused !== undefined) {
        await fiber.dispose();
        throw Object.assign(new Error(refused.message), { protocolCode: "SPILL_CONFIG_INVALID" });
      }
    }
    this.contexts.set(key, ctx);
    return ctx;
  }

  /** spec.spill.plan_max_inline_tokens as DSH's policy plugs it: `maxInlineTokens` (when given)
   * is its `maxInlineBytes`, validated by its `Config` schema and its `apply` (in contextFor, as
   * the spill op does); DSH then spills above that number, and nothing when `maxInlineBytes` is
   * omitted (apply returns at once, dsh-spill-policy lib/index.js:23, :86) or when no spill store
   * is loaded (it keeps the content inline, :103-106). */
  async planMaxInlineTokens(input) {
    if (typeof input.hasStore !== "boolean") throw new BadRequest('input "hasStore" must be a boolean');
    const given = Object.hasOwn(input, "maxInlineTokens");
    const config = validatedConfig(this.dsh.cordis, this.dsh.spillPolicy, given ? { maxInlineBytes: input.maxInlineTokens } : {}, "SPILL_CONFIG_INVALID");
    if (config.maxInlineBytes === undefined || config.maxInlineBytes === null) return null;
    await this.contextFor(config.maxInlineBytes);
    return input.hasStore ? config.maxInlineBytes : null;
  }

  async spill(session, request) {
    if (typeof request.toolName !== "string") throw new BadRequest("toolName must be a string");
    const data = request.data;
    const blocks = data?.message?.content;
    const index = Array.isArray(blocks) ? blocks.findIndex((block) => block?.type === "tool-result") : -1;
    if (index === -1 || !Array.isArray(blocks[index].content)) throw new BadRequest("data must carry a tool-result block with a content array");
    if (Object.hasOwn(request, "nested") && typeof request.nested !== "boolean") throw new BadRequest("nested must be a boolean");
    if (Object.hasOwn(request, "storeFails") && typeof request.storeFails !== "boolean") throw new BadRequest("storeFails must be a boolean");
    const limit = Object.hasOwn(request, "maxInlineTokens") ? request.maxInlineTokens : BASE_MAX_INLINE;
    const ctx = await this.contextFor(limit);
    const block = blocks[index];
    const exec = {
      name: request.toolName,
      callId: block.toolCallId,
      agent: { session },
      ...(request.nested === true ? { parent: {} } : {}),
    };
    const countBefore = this.count;
    this.failNextSave = request.storeFails === true;
    let decision;
    try {
      decision = await ctx.waterfall("tools/post-execute", exec, { content: block.content }, async () => ({ kind: "accept" }));
    } finally {
      this.failNextSave = false;
    }
    const content = decision.content ?? block.content;
    const kept = structuredClone(data);
    kept.message.content[index].content = content;
    const surface = { surfaceOp: "append" };
    if (Object.hasOwn(request, "sourceEventSeqs")) surface.sourceEventSeqs = request.sourceEventSeqs;
    const event = session.append("tool/result", kept, surface);
    const replaced = decision.content !== undefined && this.count > countBefore;
    const locator = replaced ? [...this.saved.keys()].at(-1) : undefined;
    return { event, spilled: locator === undefined ? null : { locator, bytes: Buffer.byteLength(this.saved.get(locator), "utf8") } };
  }

  spillRead(request) {
    if (typeof request.locator !== "string") throw new BadRequest("locator must be a string");
    const text = this.saved.get(request.locator);
    if (text === undefined) throw Object.assign(new Error(`no spilled text at ${request.locator}`), { protocolCode: "SPILL_NOT_FOUND" });
    return { text, bytes: Buffer.byteLength(text, "utf8") };
  }
}
