// The protocol's ops (conformance/PROTOCOL.md), each translated to DSH's own API: the session core
// (`SessionStore` in @deepseek-ai/dsh-session) and the JSONL store
// (@deepseek-ai/dsh-session-persistence-jsonl over the coordinator of
// @deepseek-ai/dsh-session-persistence), inside a cordis context as DSH runs them. Nothing here
// decides whether something is valid: every rejection is DSH's, mapped to a code by errors.mjs.
//
// Translations the protocol needs and DSH's API does not offer one to one:
// - each session is created (or forked) inside its own cordis fiber, DSH's unit of ownership, so
//   that `close` can release that one session: flush, then dispose the fiber;
// - `resume` is DSH's `sessionPersistence.prepare(id)` (repair, closers, end-seed), then the
//   prepared session is entered and announced in a fiber, as DSH's own `create` does;
// - `read` is `sessionPersistence.readFrom(id, 0)`: DSH's non-mutating read of the stored log;
// - storage "memory" is the JSONL store on a private scratch directory: DSH 0.1 publishes no
//   in-memory backend;
// - the store's automatic write-behind timer (200 ms by default) is its public configuration
//   `writeBatchMaxDelayMs`: `reset`'s `batchMaxDelayMs` is judged by the store's own `Config`
//   schema as DSH's plugin loader applies it, and the store runs with the timer at its maximum, so
//   that only `flush` and `close` write (a wall-clock timer would make what is durable depend on
//   timing; DSH never writes a batch because of its events' times). DSH has no byte bound, so
//   `batchMaxBytes` answers UNSUPPORTED_OP once DSH has accepted the delay (a delay it refuses is
//   its answer, whatever else the request names);
// - `upgrade_v0_records`, `decode_jsonl_log` and `decode_compressed_log` are DSH's store reading
//   the log placed in a store of their own (readStoredText), never the subject's; a zstd log's
//   frames, handed over decompressed, are compressed again as DSH's writer compresses a batch;
//   `place_compressed_log` is not answered: DSH's reader gives no record's place;
// - `engine_append` is `append`: DSH's compaction engine writes its bracket with the session's own
//   `append` (dsh-compaction-basic lib/index.js:437, :452, :463), the path PROTOCOL.md allows;
// - `reset` with `files` (capability import) writes the files under the store root before the
//   store opens on it (DSH's `findLog` scans that root), durable on the simulated disk; `export`
//   reads every file under the root back.
// - after each request the subject waits until the coordinator's per-session chains are idle, as
//   DSH's own dispose does (index.js of dsh-session-persistence, `installWritePath`), so a
//   request's background writes land before its answer.

import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { constants as zlibConstants, zstdCompressSync } from "node:zlib";
import { dirname, join } from "node:path";
import { protocolErrorOf } from "./errors.mjs";
import { DshEngine, projectionChanges } from "./engine.mjs";
import { DshCompaction } from "./compaction.mjs";
import { DshSpill } from "./spill.mjs";
import { BadRequest, checkerRules, pureFunctions, UnsupportedOp, validatedConfig } from "./pure.mjs";

export { UnsupportedOp };
class Crashed extends Error {}

const ERRNOS = new Set(["EIO", "ENOSPC"]);
const SEAM_ROOT = "/store"; // where file storage lives on the simulated disk
const SEAM_MEMORY_ROOT = "/memory"; // and storage "memory"

export class DshSubject {
  /**
   * @param dsh - the loaded DSH modules (dsh.mjs)
   * @param options - `{seam, storeRoot}`: `seam` is the crash seam's `{seam: {disk}, PowerLossDisk}`
   *   when the server runs with --seam; `storeRoot` is CONFORMANCE_STORE_ROOT when it is set
   */
  constructor(dsh, options) {
    this.dsh = dsh;
    this.seam = options.seam;
    this.storeRoot = options.storeRoot;
    this.pure = pureFunctions(dsh);
    this.engine = new DshEngine(dsh);
    this.compaction = new DshCompaction(dsh);
    this.spill = new DshSpill(dsh);
    if (dsh.projection !== undefined) this.pure["spec.projection.derive_projection_changes"] = (input) => projectionChanges(dsh, input);
    if (dsh.jsonl !== undefined) {
      this.pure["spec.legacy.upgrade_v0_records"] = (input) => this.upgradeV0Records(input);
      this.pure["spec.framing.decode_jsonl_log"] = (input) => this.decodeJsonlLog(input);
      this.pure["spec.framing.decode_compressed_log"] = (input) => this.decodeCompressedLog(input);
    }
    if (this.spill.capabilities.length > 0) this.pure["spec.spill.plan_max_inline_tokens"] = (input) => this.spill.planMaxInlineTokens(input);
    this.now = 0;
    this.storage = "none";
    this.compressed = true;
    this.scratch = []; // private directories to remove at exit
    this.live = new Map(); // session id -> {session, fiber}
    Date.now = () => this.now; // DSH stamps event times and default createdAt with Date.now()
  }

  get capabilities() {
    const capabilities = ["core"];
    if (this.dsh.jsonl !== undefined) capabilities.push("storage");
    if (this.dsh.jsonl !== undefined && this.seam !== undefined) capabilities.push("crash-seam");
    if (this.dsh.jsonl !== undefined) capabilities.push("batch-policy", "import", "export");
    if (Object.keys(this.pure).length > 0) capabilities.push("pure");
    capabilities.push(...checkerRules(this.dsh).map((rule) => `checker-rule:${rule}`));
    return [...capabilities, ...this.engine.capabilities, ...this.compaction.capabilities, ...this.spill.capabilities];
  }

  /** Start-up: no storage, or (kill check, PROTOCOL.md) file storage over CONFORMANCE_STORE_ROOT. */
  async start() {
    if (this.storeRoot !== undefined && this.dsh.jsonl !== undefined) await this.open("file", !onlyPlainLogs(this.storeRoot), { emptyStore: false });
    else await this.open("none", true, { emptyStore: false });
  }

  // --- the one entry point ---

  /** Answer one request object with one response object; never throws. */
  async handle(request) {
    const rid = request.rid ?? null;
    const op = request.op;
    const method = this.methodOf(op);
    const crashedBefore = this.seam?.seam.disk.crashed;
    try {
      if (method === undefined) throw new UnsupportedOp(`unsupported op ${JSON.stringify(op)}`);
      const result = await this[method](request);
      await this.quiesce();
      this.assertNotCrashed(crashedBefore);
      return { rid, ok: true, result: result ?? null };
    } catch (error) {
      await this.quiesce().catch(() => {});
      return { rid, ok: false, error: this.errorOf(error, crashedBefore) };
    }
  }

  /** The method answering `op`: a core, storage, crash or pure op, or an engine op whose
   * capability the installed release has; undefined (UNSUPPORTED_OP) otherwise. */
  methodOf(op) {
    if (typeof op !== "string") return undefined;
    if (Object.hasOwn(OPS, op)) return OPS[op];
    if (Object.hasOwn(ENGINE_OPS, op) && this.capabilities.includes(ENGINE_OPS[op])) return `op_${op}`;
    return undefined;
  }

  errorOf(error, crashedBefore) {
    if (this.seam !== undefined && this.seam.seam.disk.crashed !== undefined && crashedBefore === undefined) {
      return { code: "CRASHED", message: `simulated power loss at ${this.seam.seam.disk.crashed}` };
    }
    if (error instanceof UnsupportedOp) return { code: "UNSUPPORTED_OP", message: error.message };
    if (error instanceof BadRequest) return { code: "BAD_REQUEST", message: error.message };
    if (error instanceof Crashed) return { code: "CRASHED", message: error.message };
    if (error?.name === "ManualCompactionError") return protocolErrorOf(error);
    if (typeof error?.protocolCode === "string") return { code: error.protocolCode, message: error.message };
    return protocolErrorOf(error);
  }

  assertNotCrashed(crashedBefore) {
    const crashed = this.seam?.seam.disk.crashed;
    if (crashed !== undefined && crashedBefore === undefined) throw new Crashed(`simulated power loss at ${crashed}`);
  }

  // --- core ops ---

  async op_hello() {
    return {
      protocol: 2,
      name: "dsh",
      version: this.dsh.version,
      capabilities: this.capabilities,
      // DSH 0.1 writes format 0: v0 headers (no isSeeded) and session.jsonl[.zstd] file names.
      target: { format: 0, decisions: [] },
    };
  }

  async op_reset(request) {
    const storage = request.storage ?? "none";
    const compressed = request.compressed === undefined ? true : request.compressed; // null is not absent
    if (!["none", "memory", "file"].includes(storage) || typeof compressed !== "boolean") {
      throw new BadRequest("storage must be 'none', 'memory' or 'file' and compressed a boolean");
    }
    if (storage !== "none" && this.dsh.jsonl === undefined) {
      throw new UnsupportedOp(`DSH ${this.dsh.version} publishes no JSONL store, so storage ${JSON.stringify(storage)} is not offered`);
    }
    const files = Object.hasOwn(request, "files") ? placedFiles(request.files, storage) : undefined;
    const batchMaxDelayMs = request.batchMaxDelayMs ?? undefined;
    // The delay is DSH's to judge first, whatever else the request names: a host configuring the
    // store with it is refused at plugin load, before any other bound could matter.
    if (batchMaxDelayMs !== undefined && this.dsh.jsonl !== undefined) {
      const store = this.dsh.jsonl.JsonlSessionPersistence;
      validatedConfig(this.dsh.cordis, store, { root: "/", writeBatchMaxDelayMs: batchMaxDelayMs }, "BATCH_POLICY_INVALID");
    }
    if (request.batchMaxBytes != null) {
      throw new UnsupportedOp("DSH's write-behind has no byte bound: its only batch setting is writeBatchMaxDelayMs (dsh-session-persistence lib/index.js:785-794)");
    }
    this.now = 0;
    this.engine.forget();
    this.spill.forget();
    await this.open(storage, compressed, { emptyStore: true, files, batchMaxDelayMs });
    return null;
  }

  async op_export() {
    if (this.storage !== "file") throw new BadRequest("export needs reset with storage 'file'");
    return this.seam !== undefined ? this.seam.seam.disk.export(SEAM_ROOT) : exportDirectory(this.root);
  }

  async op_clock(request) {
    if (!Number.isSafeInteger(request.now)) throw new BadRequest("now must be a safe integer");
    this.now = request.now;
    return this.now;
  }

  async op_create(request) {
    const id = optionalId(request, "id");
    if (request.seed != null && !Array.isArray(request.seed)) throw new BadRequest("seed must be an array of events");
    const options = {};
    if (request.seed != null) options.seed = request.seed;
    if (Object.hasOwn(request, "meta")) options.meta = request.meta;
    const session = await this.owned((ctx) => ctx.sessions.create(id, options));
    return this.stateOf(session);
  }

  async op_engine_append(request) {
    return this.op_append(request);
  }

  async op_append(request) {
    const session = this.liveSession(requiredId(request, "id"));
    const surface = {};
    if (Object.hasOwn(request, "surfaceOp")) surface.surfaceOp = request.surfaceOp;
    if (Object.hasOwn(request, "sourceEventSeqs")) surface.sourceEventSeqs = request.sourceEventSeqs;
    return session.append(request.type, request.data, surface);
  }

  async op_fork(request) {
    const source = requiredId(request, "source");
    const child = optionalId(request, "child");
    const session = await this.owned((ctx) => ctx.sessions.fork(source, request.boundary, child));
    return this.stateOf(session);
  }

  async op_state(request) {
    return this.stateOf(this.liveSession(requiredId(request, "id")));
  }

  // --- storage ops ---

  async op_flush(request) {
    await this.ctx.sessions.flush(this.liveSession(requiredId(request, "id")));
    return null;
  }

  async op_close(request) {
    const id = requiredId(request, "id");
    const session = this.liveSession(id);
    await this.ctx.sessions.flush(session); // a failure leaves the session live (PROTOCOL.md)
    const entry = this.live.get(id);
    this.live.delete(id);
    await entry.fiber.dispose();
    return null;
  }

  async op_resume(request) {
    const id = requiredId(request, "id");
    const persistence = this.persistence(id);
    const preparation = await persistence.prepare(id);
    try {
      const session = await this.owned((ctx) => {
        ctx.effect(function* () {
          yield ctx.sessions.enter(preparation.session);
          ctx.sessions.announce(preparation.session);
        }, "protocol resume");
        return preparation.session;
      });
      return this.stateOf(session);
    } finally {
      preparation[Symbol.dispose]();
    }
  }

  async op_read(request) {
    const id = requiredId(request, "id");
    const stored = await this.persistence(id).readFrom(id, 0);
    return { header: stored.meta, events: stored.events };
  }

  // --- crash ops (capability crash-seam) ---

  async op_unsynced() {
    return this.disk().unsynced();
  }

  async op_crash(request) {
    const disk = this.disk();
    const keep = request.keep ?? "none";
    const valid = keep === "none" || keep === "all" || (isPlainObject(keep) && typeof keep.path === "string" && Number.isSafeInteger(keep.bytes));
    if (!valid) throw new BadRequest("keep must be 'none', 'all' or {path, bytes}");
    let survivor;
    try {
      survivor = disk.crash(keep);
    } catch (error) {
      if (error instanceof RangeError) throw new BadRequest(error.message);
      throw error;
    }
    this.seam.seam.disk = survivor;
    // Every live session dies with the process; the store restarts on what survived.
    await this.open("file", this.compressed, { emptyStore: false, keepDisk: true, batchMaxDelayMs: this.batchMaxDelayMs });
    return null;
  }

  async op_arm_crash(request) {
    this.disk().armCrash(count(request, "after"));
    return null;
  }

  async op_fail_next(request) {
    const disk = this.disk();
    if (!["write", "fsync"].includes(request.fsOp) || !ERRNOS.has(request.errno)) {
      throw new BadRequest("fsOp must be 'write' or 'fsync' and errno 'EIO' or 'ENOSPC'");
    }
    disk.failNext(request.fsOp, request.errno, count(request, "after", 0));
    return null;
  }

  async op_ops() {
    return this.disk().mutations;
  }

  async op_damage(request) {
    const disk = this.disk();
    const id = requiredId(request, "id");
    const path = await this.ctx.sessionPersistence.findLog(id);
    if (path === undefined) throw new BadRequest(`session ${JSON.stringify(id)} has no stored log to damage`);
    const spot = Object.hasOwn(request, "at") ? request.at : "middle";
    if (!DAMAGE_SPOTS.includes(spot)) throw new BadRequest(`at must be one of ${DAMAGE_SPOTS.join(", ")}`);
    let offset;
    if (Object.hasOwn(request, "offset")) {
      offset = count(request, "offset");
    } else {
      offset = spotInSecondUnit(Buffer.from(disk.nodes.get(disk.find(path)).data), path.endsWith(".zstd"), spot);
      if (offset === undefined) throw new BadRequest(`the log of ${JSON.stringify(id)} has no middle: it needs two event units after its header`);
    }
    try {
      disk.rotByte(path, offset);
    } catch (error) {
      if (error instanceof RangeError) throw new BadRequest(error.message);
      throw error;
    }
    return { path, offset };
  }

  // --- pure functions (capability pure) ---

  async op_call(request) {
    if (typeof request.function !== "string" || !isPlainObject(request.input)) {
      throw new BadRequest("call needs a function name (a string) and an input object");
    }
    const fn = Object.hasOwn(this.pure, request.function) ? this.pure[request.function] : undefined;
    if (fn === undefined) throw new UnsupportedOp(`DSH ${this.dsh.version} exports no function for ${JSON.stringify(request.function)}`);
    return fn(request.input);
  }

  /** spec.legacy.upgrade_v0_records through DSH's store: the records, one JSONL line each, after
   * the header line DSH writes for a new session (format 0, createdAt 0), read back by the
   * coordinator's `readFrom(id, 0)`, which upgrades DSH's legacy shapes as it reads
   * (dsh-session-persistence lib/index.js:931-983, snapshotStoredEvents :733). */
  async upgradeV0Records(input) {
    const id = requiredId(input, "sessionId");
    if (!Array.isArray(input.records)) throw new BadRequest("input \"records\" must be an array");
    const header = { type: "session", version: this.dsh.session.SESSION_FORMAT_VERSION, id, createdAt: 0, delegationDepth: 0 };
    const text = [header, ...input.records].map((line) => `${JSON.stringify(line)}\n`).join("");
    const stored = await this.readStoredText(id, undefined, Buffer.from(text, "utf8"), (persistence) => persistence.readFrom(id, 0));
    return stored.events;
  }

  /** spec.framing.decode_jsonl_log through DSH's store: DSH reads a log only as a file of its
   * store, so the text is placed as a plain log (session.jsonl) where the store looks for the
   * session its first line names ("s" when that line names none) and read by the store's reader
   * (`loadStored`: readPrefix and scanLog, dsh-session-persistence-jsonl lib/index.js:187-313,
   * :921-952). A refusal is DSH's answer. What it reads is the protocol's result as DSH gives it:
   * the header line is DSH's parsed header (`fromHeaderLine`, :55-68) with the `type: "session"`
   * its reader requires of every header line (`isHeaderLine`, :70-72), the records are the events
   * it decoded, and the cut offset is its torn-tail marker's `truncateTo` (null when it keeps every
   * byte). Two texts answer UNSUPPORTED_OP: one whose header names another format (DSH's store
   * reads format 0 only and refuses any other before framing: refuseForeignFormatVersion,
   * :181-186; the suite hands a format 0 subject its format 4 header lines in format 0,
   * conformance/targets.py), and one that holds a packed row (DSH expands it into the events it
   * packs and never returns the row: decodeStorageRecord, dsh-session lib/index.js:1029-1034). */
  async decodeJsonlLog(input) {
    const text = requiredText(input);
    const stored = await this.loadPlaced(text, Buffer.from(text, "utf8"), false);
    return { headerLine: { type: "session", ...stored.meta }, records: stored.events, truncateTo: stored.tornMarker?.truncateTo ?? null };
  }

  /** spec.framing.decode_compressed_log through DSH's store, as decode_jsonl_log is: each complete
   * frame's plaintext is compressed as DSH's writer compresses a batch (one checksummed frame,
   * compressZstdFrame, dsh-session-persistence-jsonl lib/index.js:567-569), the torn one with
   * ZSTD_e_flush and never ended (its blocks, with no last block and no checksum: what a crash
   * leaves of a frame), and the frames laid one after another are the session.jsonl.zstd the store
   * reads (`loadStored`: readZstdPrefix, :954-1020). The answer is DSH's: its parsed header, its
   * events (those of its torn marker's `recoveredEvents` recovered, the others committed), and its
   * torn marker's `truncateTo`, a byte of the laid file, named by the offset the input gives the
   * frame starting there. A text holding a packed row answers UNSUPPORTED_OP (decodeJsonlLog). */
  async decodeCompressedLog(input) {
    const frames = requiredFrames(input.frames, "frames");
    const torn = input.torn === null || input.torn === undefined ? undefined : requiredFrames([input.torn], "torn")[0];
    const laid = [...frames.map((frame) => ({ frame, bytes: zstdFrame(frame.text) })), ...(torn === undefined ? [] : [{ frame: torn, bytes: tornZstdFrame(torn.text) }])];
    const named = new Map(); // a frame's start in the laid file -> the offset the input gives it
    let start = 0;
    for (const { frame, bytes } of laid) {
      if (!named.has(start)) named.set(start, frame.offset);
      start += bytes.length;
    }
    const text = [...frames, ...(torn === undefined ? [] : [torn])].map((frame) => frame.text).join("");
    const stored = await this.loadPlaced(text, Buffer.concat(laid.map(({ bytes }) => bytes)), true);
    const recovered = stored.tornMarker?.recoveredEvents ?? [];
    const cut = stored.tornMarker?.truncateTo;
    return {
      headerLine: { type: "session", ...stored.meta },
      records: stored.events.slice(0, stored.events.length - recovered.length),
      recovered,
      truncateTo: cut === undefined ? null : (named.get(cut) ?? cut),
    };
  }

  /** DSH's store's reading (`loadStored`) of `bytes`, a log whose text is `text`, placed as the log
   * of the session its first line names ("s" when that line names none; DSH's store looks a log up
   * by its session id), plain or zstd. Two texts answer UNSUPPORTED_OP: one whose header names
   * another format (DSH's store reads format 0 only and refuses any other before framing:
   * refuseForeignFormatVersion, dsh-session-persistence-jsonl lib/index.js:181-186; the suite hands
   * a format 0 subject its format 4 header lines in format 0, conformance/targets.py), and one that
   * holds a packed row (DSH expands it into the events it packs and never returns the row:
   * decodeStorageRecord, dsh-session lib/index.js:1029-1034). */
  async loadPlaced(text, bytes, compressed) {
    if (PACKED_ROW.test(text)) {
      throw new UnsupportedOp("DSH's store expands a packed row into the events it packs and never returns the row, so a log that holds one cannot be given as records (dsh-session lib/index.js:1029-1034)");
    }
    let named = {};
    try {
      named = JSON.parse(text.split("\n", 1)[0]);
    } catch {
      // a first line that is not JSON names no session: DSH's scanner refuses it below
    }
    const id = typeof named?.id === "string" && named.id !== "" ? named.id : "s";
    const cwd = typeof named?.cwd === "string" && named.cwd !== "" ? named.cwd : undefined;
    let stored;
    try {
      stored = await this.readStoredText(id, cwd, bytes, (persistence) => persistence.loadStored(id), compressed);
    } catch (error) {
      if (error?.name === "SessionFormatUnsupportedError" && /uses log format v/.test(error.message)) {
        throw new UnsupportedOp(`DSH's store reads only format ${this.dsh.session.SESSION_FORMAT_VERSION} logs and refuses this one's header before framing it (dsh-session-persistence-jsonl lib/index.js:181-195): ${error.message}`);
      }
      throw error;
    }
    if (stored === undefined) throw new UnsupportedOp(`DSH's store found no log of session ${JSON.stringify(id)} in the placed file`);
    return stored;
  }

  /** `read(persistence)` on a JSONL store (plain logs) of its own whose only file is `text`, the
   * log of session `id` (in the project directory of `cwd`): a scratch directory, or under the
   * crash seam a fresh simulated disk for the call's length. The subject's own store is untouched. */
  async readStoredText(id, cwd, bytes, read, compressed = false) {
    const store = this.dsh.jsonl.JsonlSessionPersistence;
    const compression = compressed ? "zstd" : "none";
    let path;
    try {
      path = store.prototype.locate.call({ root: "/", compression }, { id, ...(cwd === undefined ? {} : { cwd }) }).path.slice(1);
    } catch (error) {
      throw new UnsupportedOp(`DSH's store cannot name a file for session ${JSON.stringify(id)}: ${error.message}`);
    }
    const faces = this.seam?.seam;
    const saved = faces?.disk;
    let root;
    if (faces !== undefined) {
      faces.disk = new this.seam.PowerLossDisk();
      root = "/scratch";
      faces.disk.place(`${root}/${path}`, bytes);
    } else {
      root = mkdtempSync(join(tmpdir(), "dsh-stored-"));
      mkdirSync(dirname(join(root, path)), { recursive: true });
      writeFileSync(join(root, path), bytes);
    }
    try {
      const ctx = new this.dsh.cordis.Context();
      await ctx.plugin(this.dsh.session.SessionStore);
      const config = { root, compression, writeBatchMaxDelayMs: this.dsh.persistence.MAX_WRITE_BATCH_DELAY_MS };
      await ctx.plugin(store, validatedConfig(this.dsh.cordis, store, config, "INTERNAL"));
      return await read(ctx.get("sessionPersistence"));
    } finally {
      if (faces !== undefined) faces.disk = saved;
      else rmSync(root, { recursive: true, force: true });
    }
  }

  // --- engine ops (capabilities prune, projection; lib/engine.mjs) ---

  async op_prune(request) {
    return this.engine.prune(this.liveSession(requiredId(request, "id")), request);
  }

  async op_project(request) {
    return this.engine.project(request);
  }

  async op_unproject(request) {
    return this.engine.unproject(request);
  }

  async op_state_of(request) {
    const id = requiredId(request, "id");
    return this.engine.stateOf(this.liveSession(id), request);
  }

  async op_snapshot(request) {
    return this.engine.snapshot(this.liveSession(requiredId(request, "id")));
  }

  async op_state_of_stored(request) {
    const id = requiredId(request, "id");
    return this.engine.stateOfStored(this.persistence(id), id, request);
  }

  // --- engine ops (capabilities compaction, overflow, checkpoint; lib/compaction.mjs) ---

  async op_compact(request) {
    return this.compaction.compact(this.liveSession(requiredId(request, "id")), request);
  }

  async op_compact_region(request) {
    return this.compaction.compactRegion(this.liveSession(requiredId(request, "id")), request);
  }

  async op_compact_if_needed(request) {
    return this.compaction.compactIfNeeded(this.liveSession(requiredId(request, "id")), request);
  }

  async op_overflow(request) {
    return this.compaction.overflow(this.liveSession(requiredId(request, "id")), request);
  }

  async op_overflow_reset(request) {
    return this.compaction.overflowReset(this.liveSession(requiredId(request, "id")));
  }

  async op_checkpoint(request) {
    return this.compaction.checkpoint(this.liveSession(requiredId(request, "id")), request);
  }

  async op_spill(request) {
    return this.spill.spill(this.liveSession(requiredId(request, "id")), request);
  }

  async op_spill_read(request) {
    return this.spill.spillRead(request);
  }

  // --- internals ---

  /** The protocol's state of a live DSH session. */
  stateOf(session) {
    return {
      id: session.id,
      events: session.events,
      nodes: session.surface.nodes,
      replaceGeneration: session.surface.replaceGeneration,
      firstLiveSeq: session.firstLiveSeq,
      seq: session.seq,
      header: session.header,
      messages: session.deriveMessages(),
    };
  }

  liveSession(id) {
    const session = this.ctx.sessions.get(id);
    if (session === undefined) throw new Error(`session "${id}" not found`);
    return session;
  }

  /** The persistence service, or SESSION_NOT_FOUND when this store has none (storage "none"). */
  persistence(id) {
    const persistence = this.ctx.get("sessionPersistence");
    if (persistence === undefined) throw new Error(`session "${id}" not found`);
    return persistence;
  }

  disk() {
    if (this.seam === undefined) throw new UnsupportedOp("the crash ops need the crash seam (start the server with --seam)");
    if (this.storage !== "file") throw new BadRequest("crash ops need reset with storage 'file'");
    return this.seam.seam.disk;
  }

  /** Run `body(ctx)` in a fresh cordis fiber that owns what it creates; returns its result. */
  async owned(body) {
    let outcome;
    const fiber = this.ctx.plugin({
      name: "protocol-session",
      inject: ["sessions"],
      apply: (ctx) => {
        try {
          outcome = { value: body(ctx) };
        } catch (error) {
          outcome = { error };
        }
      },
    });
    await fiber;
    if (outcome === undefined) throw new Error("the session fiber did not start");
    if ("error" in outcome) {
      await fiber.dispose();
      throw outcome.error;
    }
    this.live.set(outcome.value.id, { session: outcome.value, fiber });
    return outcome.value;
  }

  /** A fresh DSH context over the chosen storage: no session is live. */
  async open(storage, compressed, { emptyStore, keepDisk = false, files, batchMaxDelayMs } = {}) {
    const { Context } = this.dsh.cordis;
    this.storage = storage;
    this.compressed = compressed;
    this.batchMaxDelayMs = batchMaxDelayMs;
    this.live = new Map();
    const ctx = new Context();
    await ctx.plugin(this.dsh.session.SessionStore);
    if (storage !== "none") {
      const root = this.prepareRoot(storage, emptyStore, keepDisk);
      this.root = root;
      if (files !== undefined) this.place(root, files);
      // DSH's loader applies the plugin's Config schema before the plugin starts (cordis
      // resolveConfig): the batch delay is judged there. The store then runs with its timer at the
      // maximum: DSH's write-behind is a wall-clock timer (dsh-session-persistence index.js:354-358),
      // never the events' times, and a timer firing mid-case would make what is durable depend on
      // the machine's speed; with it, only flush and close write, whatever the delay.
      const store = this.dsh.jsonl.JsonlSessionPersistence;
      const config = { root, compression: compressed ? "zstd" : "none" };
      if (batchMaxDelayMs !== undefined) validatedConfig(this.dsh.cordis, store, { ...config, writeBatchMaxDelayMs: batchMaxDelayMs }, "BATCH_POLICY_INVALID");
      await ctx.plugin(store, validatedConfig(this.dsh.cordis, store, { ...config, writeBatchMaxDelayMs: this.dsh.persistence.MAX_WRITE_BATCH_DELAY_MS }, "INTERNAL"));
      if (ctx.get("sessionPersistence") === undefined) throw new Error(`DSH's JSONL store did not start on ${root}`);
    }
    await this.engine.attach(ctx);
    await this.compaction.attach(ctx);
    this.ctx = ctx; // the previous context is abandoned, not disposed: disposal would flush its sessions
  }

  /** Write placed files under the store root, as durable as another process would have left them. */
  place(root, files) {
    for (const { path, bytes } of files) {
      if (this.seam !== undefined) this.seam.seam.disk.place(`${root}/${path}`, bytes);
      else {
        mkdirSync(dirname(join(root, path)), { recursive: true });
        writeFileSync(join(root, path), bytes);
      }
    }
  }

  /** Where the store lives: on the simulated disk, in CONFORMANCE_STORE_ROOT, or in scratch. */
  prepareRoot(storage, emptyStore, keepDisk) {
    if (this.seam !== undefined) {
      if (!keepDisk) this.seam.seam.disk = new this.seam.PowerLossDisk();
      return storage === "file" ? SEAM_ROOT : SEAM_MEMORY_ROOT;
    }
    if (storage === "file" && this.storeRoot !== undefined) {
      if (emptyStore) for (const name of readdirSync(this.storeRoot)) rmSync(join(this.storeRoot, name), { recursive: true, force: true });
      return this.storeRoot;
    }
    for (const dir of this.scratch.splice(0)) rmSync(dir, { recursive: true, force: true });
    const dir = mkdtempSync(join(tmpdir(), "dsh-subject-"));
    this.scratch.push(dir);
    return dir;
  }

  /** Wait until the coordinator's per-session work is idle (what DSH's dispose waits for). */
  async quiesce() {
    const coordinator = this.ctx?.get("sessionPersistence")?.coordinator;
    if (coordinator === undefined) return;
    for (;;) {
      const pending = [...coordinator.chains.values(), ...coordinator.retirements.values()];
      if (pending.length === 0) return;
      await Promise.allSettled(pending);
    }
  }

  cleanup() {
    for (const dir of this.scratch.splice(0)) rmSync(dir, { recursive: true, force: true });
  }
}

/** Whether a store root holds plain logs and no compressed one. DSH's JSONL backend is configured
 * for one compression and refuses a log of the other (dsh-session-persistence-jsonl index.js:1070-1074),
 * so a process started on a root that is there (the kill check's rule) is configured as the root's
 * logs were written; an empty root gets the default, zstd. */
function onlyPlainLogs(root) {
  const names = readdirSync(root, { recursive: true }).map(String);
  const plain = names.some((name) => name.endsWith("session.jsonl"));
  return plain && !names.some((name) => name.endsWith("session.jsonl.zstd"));
}

/** The protocol's set of files (PROTOCOL.md, Placing files), decoded; BAD_REQUEST when malformed. */
function placedFiles(files, storage) {
  if (storage !== "file") throw new BadRequest("files needs storage 'file'");
  if (!Array.isArray(files)) throw new BadRequest("files must be an array of {path, bytes}");
  const seen = new Set();
  return files.map((file) => {
    if (!isPlainObject(file) || typeof file.path !== "string" || typeof file.bytes !== "string") throw new BadRequest("every file must be {path, bytes} with two strings");
    const parts = file.path.split("/");
    if (parts.some((part) => part === "" || part === "." || part === "..")) throw new BadRequest(`path ${JSON.stringify(file.path)} is not relative to the store root`);
    if (seen.has(file.path)) throw new BadRequest(`path ${JSON.stringify(file.path)} is given twice`);
    seen.add(file.path);
    if (!/^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/.test(file.bytes)) throw new BadRequest(`bytes of ${JSON.stringify(file.path)} are not base64`);
    return { path: file.path, bytes: Buffer.from(file.bytes, "base64") };
  });
}

/** Every file under a real directory, in path order, as the protocol's set of files. */
function exportDirectory(root) {
  const names = readdirSync(root, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile())
    .map((entry) => join(entry.parentPath ?? entry.path, entry.name).slice(root.length + 1));
  return names.sort().map((path) => ({ path, bytes: readFileSync(join(root, path)).toString("base64") }));
}

/** Op name to method; anything else answers UNSUPPORTED_OP. */
const OPS = {
  hello: "op_hello", reset: "op_reset", clock: "op_clock", create: "op_create", append: "op_append",
  fork: "op_fork", state: "op_state", flush: "op_flush", close: "op_close", resume: "op_resume",
  read: "op_read", engine_append: "op_engine_append", export: "op_export", unsynced: "op_unsynced", crash: "op_crash", arm_crash: "op_arm_crash",
  fail_next: "op_fail_next", ops: "op_ops", damage: "op_damage", call: "op_call",
};
const ENGINE_OPS = {
  compact: "compaction", compact_region: "compaction", compact_if_needed: "compaction", overflow: "overflow",
  overflow_reset: "overflow", checkpoint: "checkpoint", spill: "spill", spill_read: "spill", prune: "prune", project: "projection", unproject: "projection", state_of: "projection", snapshot: "projection", state_of_stored: "projection" };

function isPlainObject(value) {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function requiredId(request, key) {
  if (typeof request[key] !== "string") throw new BadRequest(`${JSON.stringify(key)} must be a session id string`);
  return request[key];
}

/** A session id where absent and null both mean "let DSH mint one". */
function optionalId(request, key) {
  return request[key] == null ? undefined : requiredId(request, key);
}

function count(request, key, fallback) {
  const value = Object.hasOwn(request, key) ? request[key] : fallback;
  if (!Number.isSafeInteger(value) || value < 0) throw new BadRequest(`${JSON.stringify(key)} must be a non-negative integer`);
  return value;
}

const DAMAGE_SPOTS = ["middle", "start", "end"];
/** A packed row's tag as the suite's logs write it (DSH's packed row types, dsh-session lib/index.js:1032). */
const PACKED_ROW = /"type"\s*:\s*"(?:text|reasoning|tool-call)-chunks"/;

/** The byte `damage` flips when no offset is given (PROTOCOL.md): in the log's second unit (line or
 * zstd frame), when a third complete unit follows it, its middle, first or last byte. */
function spotInSecondUnit(data, compressed, spot) {
  const units = compressed ? zstdFrames(data) : jsonlLines(data);
  if (units.length < 3) return undefined;
  const [start, length] = units[1];
  return { middle: start + Math.floor(length / 2), start, end: start + length - 1 }[spot];
}

function jsonlLines(data) {
  const units = [];
  let start = 0;
  for (let newline = data.indexOf(10); newline !== -1; newline = data.indexOf(10, start)) {
    units.push([start, newline + 1 - start]);
    start = newline + 1;
  }
  return units;
}

/** The complete zstd frames of a buffer, as [start, length] (RFC 8878 frame layout). */
function zstdFrames(data) {
  const units = [];
  let offset = 0;
  while (offset + 6 <= data.length && data.readUInt32LE(offset) === 0xfd2fb528) {
    const start = offset;
    const descriptor = data[offset + 4];
    const sizeFlag = descriptor >>> 6;
    const singleSegment = (descriptor & 0x20) !== 0;
    const dictionaryBytes = [0, 1, 2, 4][descriptor & 3];
    const sizeBytes = sizeFlag === 0 ? (singleSegment ? 1 : 0) : 1 << sizeFlag;
    offset += 5 + (singleSegment ? 0 : 1) + dictionaryBytes + sizeBytes;
    for (;;) {
      if (offset + 3 > data.length) return units;
      const header = data.readUIntLE(offset, 3);
      const blockType = (header >>> 1) & 3; // 1 is an RLE block: one byte of payload
      offset += 3 + (blockType === 1 ? 1 : header >>> 3);
      if (header & 1) break;
    }
    if (descriptor & 4) offset += 4;
    if (offset > data.length) return units;
    units.push([start, offset - start]);
  }
  return units;
}

/** A zstd log's frames as the protocol hands them: `[{offset, text}, …]`, each text UTF-8 text. */
function requiredFrames(frames, what) {
  if (!Array.isArray(frames)) throw new BadRequest(`input "${what}" must be an array`);
  for (const frame of frames) {
    if (!isPlainObject(frame) || !Number.isSafeInteger(frame.offset) || typeof frame.text !== "string") {
      throw new BadRequest(`every frame of "${what}" must be an object with an integer "offset" and a string "text"`);
    }
    if (!frame.text.isWellFormed()) throw new BadRequest(`a frame of "${what}" must be UTF-8 text (it holds a lone surrogate)`);
  }
  return frames;
}

/** One complete frame as DSH's writer compresses a batch: checksummed (compressZstdFrame,
 * dsh-session-persistence-jsonl lib/index.js:560-569, CHECKSUM_OPTIONS :495). */
function zstdFrame(text) {
  return zstdCompressSync(Buffer.from(text, "utf8"), { params: { [zlibConstants.ZSTD_c_checksumFlag]: 1 } });
}

/** A torn final frame holding `text` in whole blocks: compressed and flushed but never ended (no
 * last block, no checksum), or, for no text, the frame's magic number alone. */
function tornZstdFrame(text) {
  const bytes = zstdCompressSync(Buffer.from(text, "utf8"), { finishFlush: zlibConstants.ZSTD_e_flush, params: { [zlibConstants.ZSTD_c_checksumFlag]: 1 } });
  return bytes.length >= 4 ? bytes : zstdFrame("").subarray(0, 4);
}

function requiredText(input) {
  if (typeof input.text !== "string") throw new BadRequest('input "text" must be a string');
  return input.text;
}
