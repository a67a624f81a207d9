// The protocol's engine ops that DSH 0.1 publishes a package for (conformance/PROTOCOL.md, "Engine
// ops"): capability `prune` through @deepseek-ai/dsh-compaction-tool-result-pruner, capability
// `projection` through @deepseek-ai/dsh-session-projection. Every other engine op (compact,
// compact_region, compact_if_needed, overflow, spill, checkpoint) answers UNSUPPORTED_OP: DSH 0.1
// publishes no package the protocol could drive for them.
//
// Translations:
// - `prune` runs DSH's own pass, `ToolResultPruner.prototype.pruneSession`, on the live session with
//   the suite's thresholds as the service gets them (its `Config` schema, then its `resolveConfig`), and the token meter's
//   `estimateMessage` for the price, the two things the pass reads from its service (`config`,
//   `ctx.tokenMeter`). The real service is not plugged: a token meter in the context would register
//   its own projection units with the registry, and `snapshot` would serve them.
// - the projection units are the suite's catalogue (spec/projections/catalogue.py), written as DSH
//   `ProjectionDefinition`s: the protocol names a unit, the subject registers its copy. Registering,
//   sharing, the stateVersion check, folding and serving are DSH's `SessionProjectionRegistry`.
// - `state_of` reads DSH's `snapshot` (DSH's only read face) and picks the key;
// - `state_of_stored` is DSH's cold read: `restore` over the stored log as `readFrom(id, 0)` gives
//   it, with an empty checkpoint, since DSH 0.1 publishes no store for the projection cache.
// - the registrations are the subject's: a crash (a new DSH context) registers them again, a reset
//   forgets them.

import { BadRequest, pruneConfig } from "./pure.mjs";

const sameState = (state) => state;
const isCount = (value) => Number.isSafeInteger(value) && value >= 0;
const hasKeys = (value, keys) =>
  typeof value === "object" && value !== null && !Array.isArray(value) && Object.keys(value).sort().join() === [...keys].sort().join();

/** A DSH schema (`parse` returns the value or throws) from a predicate. */
const schemaOf = (key, predicate) => ({
  parse(value) {
    if (!predicate(value)) throw new Error(`session projection ${JSON.stringify(key)}: state ${JSON.stringify(value)} does not fit its schema`);
    return value;
  },
});

/** The catalogue: key -> stateVersion -> the unit's init, apply and schema predicate. */
const CATALOGUE = {
  sessionDigest: {
    1: {
      init: () => ({ compactions: 0, prunes: 0, lastShadowedTokens: null }),
      valid: (s) => hasKeys(s, ["compactions", "prunes", "lastShadowedTokens"]) && isCount(s.compactions) && isCount(s.prunes) && (s.lastShadowedTokens === null || isCount(s.lastShadowedTokens)),
      apply(state, event) {
        const data = event.data ?? {};
        if (event.type === "compaction/end" && !Object.hasOwn(data, "error")) return { ...state, compactions: state.compactions + 1 };
        if (event.type === "compaction/prune") return { ...state, prunes: state.prunes + 1, lastShadowedTokens: data.shadowedTokenCount ?? null };
        return state;
      },
    },
  },
  turnLedger: {
    1: {
      init: () => ({ turns: 0 }),
      valid: (s) => hasKeys(s, ["turns"]) && isCount(s.turns),
      apply: (state, event) => (event.type === "turn/start" ? { turns: state.turns + 1 } : state),
    },
    2: {
      init: () => ({ turns: 0, steps: 0 }),
      valid: (s) => hasKeys(s, ["turns", "steps"]) && isCount(s.turns) && isCount(s.steps),
      apply(state, event) {
        if (event.type === "turn/start") return { ...state, turns: state.turns + 1 };
        if (event.type === "step/start") return { ...state, steps: state.steps + 1 };
        return state;
      },
    },
  },
};

/** The DSH definition of the catalogue unit `name` at `stateVersion` (absent: its first). A
 * version that is not a non-negative integer goes to DSH's registry, which judges it. */
function catalogueDefinition(name, stateVersion) {
  const versions = typeof name === "string" && Object.hasOwn(CATALOGUE, name) ? CATALOGUE[name] : undefined;
  if (versions === undefined) throw new BadRequest(`unit must be one of ${Object.keys(CATALOGUE).join(", ")}`);
  const first = Number(Object.keys(versions)[0]);
  const version = stateVersion === undefined ? first : stateVersion;
  const judged = Number.isSafeInteger(version) && version >= 0;
  const unit = judged ? versions[version] : versions[first];
  if (unit === undefined) throw new BadRequest(`the catalogue defines ${name} at stateVersion ${Object.keys(versions).join(", ")}`);
  return { key: name, stateVersion: version, schema: schemaOf(name, unit.valid), init: unit.init, apply: unit.apply, view: sameState };
}

export class DshEngine {
  /** @param dsh - the loaded DSH modules (dsh.mjs) */
  constructor(dsh) {
    this.dsh = dsh;
    this.held = []; // [{definition, dispose}] in registration order: the subject's registrants
  }

  get capabilities() {
    const capabilities = [];
    if (this.dsh.pruner !== undefined && this.dsh.tokenMeter !== undefined) capabilities.push("prune");
    if (this.dsh.projection !== undefined) capabilities.push("projection");
    return capabilities;
  }

  /** Plug what a fresh DSH context needs and register the held units again (after a crash). */
  async attach(ctx) {
    if (this.dsh.projection === undefined) return;
    await ctx.plugin(this.dsh.projection.SessionProjectionRegistry);
    this.registry = ctx.get("sessionProjections");
    for (const entry of this.held) entry.dispose = this.registry.register(entry.definition);
  }

  /** A reset: every registration is forgotten. */
  forget() {
    this.held = [];
  }

  prune(session, request) {
    const { pruner, tokenMeter } = this.dsh;
    const proto = pruner.ToolResultPruner.prototype;
    const pass = {
      config: pruneConfig(this.dsh, Object.hasOwn(request, "config") ? request.config : undefined),
      measureContent: proto.measureContent,
      pruneContent: proto.pruneContent,
      ctx: { tokenMeter: { estimateMessage: (message) => tokenMeter.TokenMeter.prototype.estimateMessage(message) } },
    };
    return proto.pruneSession.call(pass, session);
  }

  project(request) {
    const definition = catalogueDefinition(request.unit, Object.hasOwn(request, "stateVersion") ? request.stateVersion : undefined);
    const dispose = this.registry.register(definition); // DSH refuses a conflicting stateVersion
    this.held.push({ definition, dispose });
    return null;
  }

  unproject(request) {
    catalogueDefinition(request.unit);
    const index = this.held.findLastIndex((entry) => entry.definition.key === request.unit);
    if (index === -1) return null;
    const [entry] = this.held.splice(index, 1);
    entry.dispose();
    return null;
  }

  stateOf(session, request) {
    const key = catalogueDefinition(request.unit).key;
    const values = this.registry.snapshot(session).values;
    return Object.hasOwn(values, key) ? values[key] : null;
  }

  snapshot(session) {
    return this.registry.snapshot(session);
  }

  async stateOfStored(persistence, id, request) {
    const key = catalogueDefinition(request.unit).key;
    const stored = await persistence.readFrom(id, 0);
    const values = this.registry.restore({}, stored.events, 0).snapshot.values;
    return Object.hasOwn(values, key) ? values[key] : null;
  }
}

/** `spec.projection.derive_projection_changes` (capability `pure`): the seed's digest driven by
 * DSH's registry over `events` as committed events, each changed flag from DSH's change feed
 * (its `Object.is` gate, index.js `drive`). */
export async function projectionChanges(dsh, input) {
  if (input.unit !== "sessionDigest") throw new BadRequest('unit must be "sessionDigest"');
  const events = input.events;
  if (!Array.isArray(events) || !events.every((e) => typeof e === "object" && e !== null && !Array.isArray(e))) {
    throw new BadRequest('input "events" must be an array of objects');
  }
  const ctx = new dsh.cordis.Context();
  await ctx.plugin(dsh.projection.SessionProjectionRegistry);
  const registry = ctx.get("sessionProjections");
  registry.register(catalogueDefinition("sessionDigest"));
  const changedAt = new Set();
  registry.onChanged((_session, _key, _value, seq) => changedAt.add(seq));
  const session = { events: [], seq: 0 };
  events.forEach((event, index) => {
    // drive() names an event by its seq; the position stands in for one the input lacks.
    const committed = { ...event, seq: index };
    session.events.push(committed);
    session.seq = index + 1;
    registry.drive(session, committed);
  });
  return { state: registry.snapshot(session).values.sessionDigest, changed: events.map((_, index) => changedAt.has(index)) };
}
