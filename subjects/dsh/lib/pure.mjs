// The protocol's `call` op (capability `pure`, conformance/PROTOCOL.md's table), answered by the
// pure functions DSH exports. Each entry checks the input's shape (a wrong shape is BAD_REQUEST,
// as the protocol says), calls DSH's function and writes its result in the protocol's JSON form.
// A function DSH does not export is absent here, so `call` answers UNSUPPORTED_OP for it.

import { checkerRuleOf, COMPANION_RULES, RESTORE_RULES } from "./errors.mjs";

export class BadRequest extends Error {
  constructor(message) {
    super(message);
    this.name = "BadRequest";
  }
}

/** What DSH does not offer: the protocol's UNSUPPORTED_OP. */
export class UnsupportedOp extends Error {}

const isObject = (value) => typeof value === "object" && value !== null && !Array.isArray(value);

function array(input, key) {
  if (!Array.isArray(input[key])) throw new BadRequest(`input ${JSON.stringify(key)} must be an array`);
  return input[key];
}

function events(input, key = "events") {
  const entries = array(input, key);
  if (!entries.every(isObject)) throw new BadRequest(`every entry of input ${JSON.stringify(key)} must be an object`);
  return entries;
}

function safeInteger(value, what) {
  if (!Number.isSafeInteger(value)) throw new BadRequest(`${what} must be a safe integer`);
  return value;
}

function nodes(input) {
  return array(input, "nodes").map((seq) => safeInteger(seq, "every node"));
}

function string(input, key) {
  if (typeof input[key] !== "string") throw new BadRequest(`input ${JSON.stringify(key)} must be a string`);
  return input[key];
}

function object(input, key) {
  if (!isObject(input[key])) throw new BadRequest(`input ${JSON.stringify(key)} must be an object`);
  return input[key];
}

function exactPruneConfig(input) {
  const raw = object(input, "config");
  const config = {};
  for (const key of ["thresholdChars", "headChars", "tailChars"]) config[key] = safeInteger(raw[key], `config.${key}`);
  return config;
}

/** A plugin's configuration as DSH's loader hands it over: validated by the plugin's `Config`
 * schema (cordis resolveConfig); a refusal is `code`. */
export function validatedConfig(cordis, plugin, config, code) {
  try {
    return cordis.resolveConfig(plugin, config);
  } catch (error) {
    if (error?.name === "ValidationError") throw Object.assign(new Error(error.message), { protocolCode: code });
    throw error;
  }
}

/** The pruner's configuration as the plugged service gets it: DSH's loader applies the plugin's
 * `Config` schema (cordis resolveConfig), then the constructor calls `resolveConfig`. A refusal
 * of either is PRUNE_CONFIG_INVALID. */
export function pruneConfig(dsh, raw) {
  const { ToolResultPruner, resolveConfig } = dsh.pruner;
  try {
    return resolveConfig(validatedConfig(dsh.cordis, ToolResultPruner, raw, "PRUNE_CONFIG_INVALID"));
  } catch (error) {
    throw Object.assign(new Error(error.message), { protocolCode: "PRUNE_CONFIG_INVALID" });
  }
}

/** A duck-typed session for DSH's tool-pairing queries: they read `events` and `surface`. */
function surfaceView(input) {
  return { events: events(input), surface: { nodes: nodes(input), replaceGeneration: 0 } };
}

/** The protocol's functions that the installed DSH packages implement, name to adapter. */
export function pureFunctions(dsh) {
  const table = {};
  const session = dsh.session;
  if (session !== undefined) {
    table["spec.surface.fold_surface"] = (input) => {
      const fold = session.foldSurface(events(input));
      // DSH's fold returns no generation counter; every replacement is one generation.
      return {
        nodes: fold.nodes,
        replaceGeneration: fold.replacements.length,
        replacements: fold.replacements.map((r) => ({ seq: r.seq, start: r.start, end: r.end, shadowed: r.shadowedSeqs })),
      };
    };
    table["spec.repair.derive_closers"] = (input) => session.interruptedTurnClosers(events(input));
    table["spec.chunk_rows.decode_storage_record"] = (input) => session.decodeStorageRecord(input.record);
    table["spec.header.validate_header"] = (input) => {
      // DSH validates a stored header when it restores a session from persistence.
      session.Session.fromRestore(string(input, "sessionId"), undefined, structuredClone(input.header));
      return null;
    };
  }
  const jsonl = dsh.jsonl;
  if (jsonl !== undefined) {
    // DSH's path functions are private to the store; its `locate` method joins them and reads
    // nothing but `root` and `compression`, so it is called on a bare object with those two.
    const locate = (meta, compressed = true) =>
      jsonl.JsonlSessionPersistence.prototype.locate.call({ root: "/", compression: compressed ? "zstd" : "none" }, meta).path.split("/").slice(1);
    table["spec.storage.encode_segment"] = (input) => locate({ id: string(input, "id") })[1];
    table["spec.storage.encode_project_key"] = (input) => locate({ id: "x", cwd: string(input, "cwd") })[0];
    table["spec.storage.derive_session_relpath"] = (input) => locate(object(input, "header"), input.compressed !== false);
  }
  const pruner = dsh.pruner;
  if (pruner !== undefined) {
    table["spec.prune.decode_prune_config"] = (input) => {
      const config = pruneConfig(dsh, input.config);
      return { thresholdChars: config.thresholdChars, headChars: config.headChars, tailChars: config.tailChars };
    };
    table["spec.prune.plan_prune_events"] = (input) => planPruneEvents(dsh, input);
    table["spec.prune.plan_pruned_content"] = (input) => {
      const blocks = array(input, "blocks");
      const proto = pruner.ToolResultPruner.prototype;
      // pruneContent reads only `config` and `measureContent`: the service is not needed.
      return proto.pruneContent.call({ config: exactPruneConfig(input), measureContent: proto.measureContent }, blocks);
    };
  }
  const compaction = dsh.compaction;
  if (compaction !== undefined) {
    const before = (view, seq) => compaction.toolPairingBalancedBefore(view, seq);
    const after = (view, seq) => compaction.toolPairingBalancedAfter(view, seq);
    table["spec.pairing.is_balanced_before"] = (input) => before(surfaceView(input), safeInteger(input.seq, "seq"));
    table["spec.pairing.is_balanced_after"] = (input) => after(surfaceView(input), safeInteger(input.seq, "seq"));
    table["spec.pairing.derive_cut_balance"] = (input) => {
      const view = surfaceView(input);
      const seqs = view.surface.nodes;
      // An empty surface has one cut and it is balanced; DSH's queries need a node to name it.
      if (seqs.length === 0) return [true];
      // DSH folds and checks the whole surface on its first query, so ask about the last node
      // first; then the cut after node i is DSH's answer on the surface's first i + 1 nodes (a
      // query names a node by seq, so a seq that occurs twice could not name its earlier cut).
      after(view, seqs.at(-1));
      const prefix = (length) => ({ events: view.events, surface: { nodes: seqs.slice(0, length), replaceGeneration: 0 } });
      return [before(prefix(1), seqs[0]), ...seqs.map((seq, index) => after(prefix(index + 1), seq))];
    };
  }
  if (session !== undefined && dsh.cordis !== undefined) {
    table["spec.checker.check_log"] = (input) => checkLog(dsh, input);
  }
  if (session !== undefined && dsh.tokenMeter !== undefined) {
    table["spec.tokens.price_surface"] = (input) => priceSurface(dsh, input);
  }
  if (dsh.shadowPrice !== undefined) {
    table["spec.tokens.fold_shadow_price"] = (input) => foldShadowPrice(dsh.shadowPrice, input);
  }
  return table;
}

/** DSH's prune pass (ToolResultPruner.pruneSession) run on a session that records its appends
 * instead of logging them: each oversized result gives a compaction/prune event and its
 * replacing tool/result, which are the protocol's plan entries. */
function planPruneEvents(dsh, input) {
  const view = surfaceView(input);
  const proto = dsh.pruner.ToolResultPruner.prototype;
  const config = pruneConfig(dsh, input.config);
  const appended = [];
  const recorder = {
    events: view.events,
    surface: view.surface,
    append(type, data, surface) {
      appended.push({ type, data, surface });
      return { seq: view.events.length + appended.length - 1 };
    },
  };
  const pruner = {
    config,
    measureContent: proto.measureContent,
    pruneContent: proto.pruneContent,
    ctx: { tokenMeter: { estimateMessage: (message) => dsh.tokenMeter.TokenMeter.prototype.estimateMessage(message) } },
  };
  const { pruned } = proto.pruneSession.call(pruner, recorder);
  return pruned.map((entry, index) => {
    const prune = appended[2 * index];
    const replacement = appended[2 * index + 1];
    return {
      originalSeq: entry.originalSeq,
      callId: entry.callId,
      pruneData: prune.data,
      replacementData: replacement.data,
      surfaceOp: replacement.surface.surfaceOp,
      sourceEventSeqs: replacement.surface.sourceEventSeqs,
      charsBefore: entry.charsBefore,
      charsAfter: entry.charsAfter,
    };
  });
}

/** One step of DSH's shadow-price fold, through the token meter's published contextBreakdown
 * projection (its `apply` folds foldSurfaceProjection into `messageTokens` and `claim`). */
function foldShadowPrice(definition, input) {
  let claim;
  if (input.claim !== null && input.claim !== undefined) {
    const raw = object(input, "claim");
    claim = { start: safeInteger(raw.start, "claim.start"), end: safeInteger(raw.end, "claim.end"), tokens: safeInteger(raw.tokens, "claim.tokens") };
  }
  const event = object(input, "event");
  const state = { ...definition.init(), ...(claim === undefined ? {} : { claim }) };
  const next = definition.apply(state, event);
  return { claim: next.claim ?? null, delta: next.messageTokens - state.messageTokens };
}

/** spec.tokens.price_surface as DSH's token meter prices a surface node: the message its event
 * shows (dsh-session's deriveEventMessage) by the meter's estimateMessage, 0 for an event that
 * shows none (dsh-token-meter lib/index.js:112-129, foldSurfaceTokens :364-367). The meter prices
 * the events it folds, so a node that names no event of the log never reaches it: UNSUPPORTED_OP. */
function priceSurface(dsh, input) {
  const log = events(input);
  const meter = dsh.tokenMeter.TokenMeter.prototype;
  return nodes(input).map((seq) => {
    const event = log.find((candidate) => candidate.seq === seq);
    if (event === undefined) {
      throw new UnsupportedOp(`DSH's token meter prices the events it folds, never a node by seq: node ${seq} names no event of the log (dsh-token-meter lib/index.js:355-367)`);
    }
    const message = dsh.session.deriveEventMessage(event);
    return [seq, message === null ? 0 : meter.estimateMessage(message)];
  });
}

/** The checker rule ids the subject claims (capabilities `checker-rule:<id>`): those DSH's restore
 * path states and those its published invariant companions state, in both profiles (errors.mjs);
 * whether the companions run is check_log's business, not the claim's. */
export function checkerRules(dsh) {
  if (dsh.session === undefined || dsh.cordis === undefined) return [];
  return [...RESTORE_RULES, ...COMPANION_RULES];
}

/** spec.checker.check_log as DSH judges a whole log: its first refusal, as `[{rule, seq}]`, or `[]`.
 * The events are a seed of DSH's `Session` constructor, which validates each in order and names the
 * index it refuses (dsh-session lib/index.js:1374-1391) and, as for every seed, appends a
 * session/end-seed when the log does not end with one. Then, with the relational rules and the
 * profile's invariant companions (as shipped none runs, though their rules are claimed: DSH's
 * default composition is the constructor alone), each companion's installer (what it registers with DSH's
 * invariant registry, in the order dsh.mjs plugs them, which is the order of their session/created
 * listeners) seeds its trace from that session's events, as it does when DSH announces a restored
 * session (dsh-session lib/invariant.js `seedSession`, dsh-compaction lib/invariant.js `seed`), and
 * fails with DSH's `InvariantError`; the refused event is the one its loop was reading. DSH stops
 * at its first refusal, so at most one violation is reported. The header and formatVersion are not
 * read: no rule DSH states depends on them. */
async function checkLog(dsh, input) {
  const log = events(input);
  const seqOf = (event) => (Number.isSafeInteger(event?.seq) ? event.seq : null);
  let session;
  try {
    session = dsh.session.Session.create("check", structuredClone(log));
  } catch (error) {
    const index = /at index (\d+)/.exec(error instanceof Error ? error.message : "");
    return [{ rule: checkerRuleOf(error), seq: index === null ? null : seqOf(log[Number(index[1])]) }];
  }
  if (!dsh.invariants || input.relational === false) return [];
  for (const companion of dsh.companions) {
    const installers = [];
    await companion.apply({ invariants: { register: (packageName, install) => installers.push({ packageName, install }) } });
    for (const { packageName, install } of installers) {
      let reading; // the event the companion's loop reads when it fails
      const view = {
        id: session.id,
        get events() {
          return (function* () {
            for (const event of session.events) yield (reading = event);
          })();
        },
      };
      const fail = (message) => {
        throw new dsh.InvariantError(packageName, message);
      };
      try {
        install({ sessions: { list: () => [view] }, on: () => () => {} }, fail);
      } catch (error) {
        if (!(error instanceof dsh.InvariantError)) throw error;
        return [{ rule: checkerRuleOf(error), seq: seqOf(reading) }];
      }
    }
  }
  return [];
}
