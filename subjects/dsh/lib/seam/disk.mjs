// A simulated disk that can lose power: the crash seam under DSH's JSONL store.
//
// It mirrors reference/powerloss.py (SPEC-DECISIONS D3's power-loss model), in JavaScript:
// - a file's content is durable up to its last fsync; since then it has kept its first `kept`
//   bytes and holds pending bytes after them; a crash keeps `kept + k` of them for a chosen k;
//   a truncate below the durable size moves the cut durable bytes to `lost`, so a crash that
//   keeps nothing brings them back;
// - a directory's entries (a name created, linked or removed, a new subdirectory) are durable only
//   after an fsync of that directory; a crash keeps all of a directory's unsynced entry changes
//   or none (the protocol's crash keeps none, except with keep "all");
// - every mutating call (mkdir, create, write, truncate, fsync, directory fsync, link, remove) is
//   counted; `armCrash(n)` makes the n-th from now fail as a crash, and every call after it too;
//   `failNext(kind, errno, after)` makes one write or file fsync fail with no effect at all.
// The Node `fs` faces DSH calls are in fs-promises.mjs and fs.mjs; this module knows nothing of DSH.

import { posix } from "node:path";

/** Thrown by the call the armed crash stops, and by every call after it: the power is out. */
export class SimulatedCrash extends Error {
  constructor(message) {
    super(message);
    this.name = "SimulatedCrash";
  }
}

/** A Node-style file-system error (`code`, `errno`, `syscall`, `path`), as node:fs throws. */
export function fsError(code, syscall, path) {
  const texts = {
    ENOENT: "no such file or directory", EEXIST: "file already exists", ENOTDIR: "not a directory",
    EISDIR: "illegal operation on a directory", EIO: "i/o error", ENOSPC: "no space left on device",
    EINVAL: "invalid argument", EPERM: "operation not permitted", EBADF: "bad file descriptor",
  };
  const numbers = { ENOENT: -2, EEXIST: -17, ENOTDIR: -20, EISDIR: -21, EIO: -5, ENOSPC: -28, EINVAL: -22, EPERM: -1, EBADF: -9 };
  const error = new Error(`${code}: ${texts[code] ?? "error"}, ${syscall} '${path}'`);
  Object.assign(error, { code, errno: numbers[code] ?? -1, syscall, path });
  return error;
}

const ROOT = 0; // node id of "/"

function parts(path) {
  if (!path.startsWith("/")) throw new Error(`the simulated disk takes absolute paths, got ${JSON.stringify(path)}`);
  return posix.normalize(path).split("/").filter((part) => part.length > 0);
}

export class PowerLossDisk {
  constructor() {
    this.nodes = new Map([[ROOT, { kind: "dir", path: "/", durable: new Map(), current: new Map() }]]);
    this.nextNode = 1;
    this.mutations = 0; // mutating calls attempted, the crashing one included
    this.crashAfter = undefined; // the value of `mutations` whose call crashes
    this.crashed = undefined; // a description of the call the armed crash stopped
    this.faults = []; // {kind: "write" | "fsync", code, remaining}
    this.changes = 0n; // a clock for mtime/ctime, so a file's revision changes with its content
  }

  // --- the gate every call passes ---

  /** Every call enters here: a dead disk refuses it; a mutating one is counted, may crash. */
  enter(op, path, mutating) {
    if (this.crashed !== undefined) throw new SimulatedCrash(`${op} ${path}: the power is already out`);
    if (!mutating) return;
    this.mutations += 1;
    if (this.mutations === this.crashAfter) {
      this.crashed = `${op} ${path}`;
      throw new SimulatedCrash(`power cut at mutating op #${this.mutations}: ${op} ${path}`);
    }
  }

  /** An armed fault for this kind of call fires (the call then has no effect). */
  gate(kind, syscall, path) {
    const fault = this.faults.find((candidate) => candidate.kind === kind);
    if (fault === undefined) return;
    if (fault.remaining > 0) {
      fault.remaining -= 1;
      return;
    }
    this.faults.splice(this.faults.indexOf(fault), 1);
    throw fsError(fault.code, syscall, path);
  }

  armCrash(after) {
    this.crashAfter = this.mutations + after + 1;
  }

  failNext(kind, code, after) {
    this.faults.push({ kind, code, remaining: after });
  }

  // --- the namespace ---

  add(node) {
    const id = this.nextNode++;
    this.nodes.set(id, node);
    return id;
  }

  /** The node a current name reaches, or undefined. */
  find(path) {
    let id = ROOT;
    for (const name of parts(path)) {
      const node = this.nodes.get(id);
      if (node.kind !== "dir" || !node.current.has(name)) return undefined;
      id = node.current.get(name);
    }
    return id;
  }

  /** The parent directory of a path and the last name, or a Node error. */
  parent(path, syscall) {
    const names = parts(path);
    if (names.length === 0) throw fsError("EISDIR", syscall, path);
    let id = ROOT;
    for (const name of names.slice(0, -1)) {
      const node = this.nodes.get(id);
      if (!node.current.has(name)) throw fsError("ENOENT", syscall, path);
      id = node.current.get(name);
      if (this.nodes.get(id).kind !== "dir") throw fsError("ENOTDIR", syscall, path);
    }
    return [this.nodes.get(id), names.at(-1)];
  }

  node(path, syscall) {
    const id = this.find(path);
    if (id === undefined) {
      this.parent(path, syscall); // a missing parent answers ENOENT or ENOTDIR, as Node does
      throw fsError("ENOENT", syscall, path);
    }
    return [id, this.nodes.get(id)];
  }

  file(path, syscall) {
    const [id, node] = this.node(path, syscall);
    if (node.kind !== "file") throw fsError("EISDIR", syscall, path);
    return [id, node];
  }

  touch(node) {
    this.changes += 1n;
    node.changed = this.changes;
  }

  // --- mutating calls (each counted) ---

  mkdir(path, recursive) {
    this.enter("mkdir", path, true);
    const names = parts(path);
    let dir = this.nodes.get(ROOT);
    for (const [depth, name] of names.entries()) {
      let id = dir.current.get(name);
      const last = depth === names.length - 1;
      if (id === undefined) {
        if (!last && !recursive) throw fsError("ENOENT", "mkdir", path);
        id = this.add({ kind: "dir", path: "/" + names.slice(0, depth + 1).join("/"), durable: new Map(), current: new Map() });
        dir.current.set(name, id);
      } else if (this.nodes.get(id).kind !== "dir") {
        throw fsError(last ? "EEXIST" : "ENOTDIR", "mkdir", path);
      } else if (last && !recursive) {
        throw fsError("EEXIST", "mkdir", path);
      }
      dir = this.nodes.get(id);
    }
  }

  create(path) {
    this.enter("create", path, true);
    const [parent, name] = this.parent(path, "open");
    if (parent.current.has(name)) throw fsError("EEXIST", "open", path);
    const id = this.add({ kind: "file", data: Buffer.alloc(0), kept: 0, lost: Buffer.alloc(0), changed: 0n });
    parent.current.set(name, id);
    this.touch(this.nodes.get(id));
    return id;
  }

  write(id, path, bytes) {
    this.enter("write", path, true);
    this.gate("write", "write", path);
    const file = this.nodes.get(id);
    file.data = Buffer.concat([file.data, bytes]);
    this.touch(file);
  }

  truncate(id, path, size) {
    this.enter("truncate", path, true);
    const file = this.nodes.get(id);
    if (size < 0) throw fsError("EINVAL", "ftruncate", path);
    if (size < file.kept) {
      file.lost = Buffer.concat([file.data.subarray(size, file.kept), file.lost]);
      file.kept = size;
    }
    file.data = size <= file.data.length ? Buffer.from(file.data.subarray(0, size)) : Buffer.concat([file.data, Buffer.alloc(size - file.data.length)]);
    this.touch(file);
  }

  fsync(id, path) {
    const node = this.nodes.get(id);
    if (node.kind === "dir") {
      this.enter("fsync_dir", path, true);
      node.durable = new Map(node.current);
      return;
    }
    this.enter("fsync", path, true);
    this.gate("fsync", "fsync", path);
    node.kept = node.data.length;
    node.lost = Buffer.alloc(0);
  }

  link(src, dst) {
    this.enter("link", src, true);
    const [id, node] = this.node(src, "link");
    if (node.kind === "dir") throw fsError("EPERM", "link", src);
    const [parent, name] = this.parent(dst, "link");
    if (parent.current.has(name)) throw fsError("EEXIST", "link", dst);
    parent.current.set(name, id);
  }

  remove(path) {
    this.enter("remove", path, true);
    const [parent, name] = this.parent(path, "rm");
    if (!parent.current.has(name)) throw fsError("ENOENT", "rm", path);
    parent.current.delete(name);
  }

  /** Bit rot: the byte at `offset` becomes its complement; not a mutating call (no count, no fault). */
  rotByte(path, offset) {
    const id = this.find(path);
    const file = id === undefined ? undefined : this.nodes.get(id);
    if (file?.kind !== "file") throw new RangeError(`${path} is not a file on the simulated disk`);
    if (!(offset >= 0 && offset < file.data.length)) throw new RangeError(`offset ${offset} is outside ${path} (${file.data.length} bytes)`);
    file.data[offset] ^= 0xff;
  }

  // --- placing and exporting (capabilities import, export): not calls of DSH's, so never counted ---

  /** A file another process wrote and made durable, with its directories. */
  place(path, bytes) {
    const names = parts(path);
    let dir = this.nodes.get(ROOT);
    for (const [depth, name] of names.slice(0, -1).entries()) {
      let id = dir.current.get(name);
      if (id === undefined) {
        id = this.add({ kind: "dir", path: "/" + names.slice(0, depth + 1).join("/"), durable: new Map(), current: new Map() });
        dir.current.set(name, id);
        dir.durable.set(name, id);
      }
      dir = this.nodes.get(id);
    }
    const id = this.add({ kind: "file", data: Buffer.from(bytes), kept: bytes.length, lost: Buffer.alloc(0), changed: 0n });
    dir.current.set(names.at(-1), id);
    dir.durable.set(names.at(-1), id);
    this.touch(this.nodes.get(id));
  }

  /** Every file under `root` as it is now, in path order: `{path, bytes}` (base64), path relative. */
  export(root) {
    const rootId = this.find(root);
    if (rootId === undefined) return [];
    const files = [...this.walk(rootId, "")].filter(([, id]) => this.nodes.get(id).kind === "file");
    return files
      .map(([path, id]) => ({ path: path.slice(1), bytes: this.nodes.get(id).data.toString("base64") }))
      .sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  }

  // --- observing ---

  /** Every (path, node id) a current name reaches, depth first. */
  *walk(dirId = ROOT, prefix = "") {
    for (const [name, id] of this.nodes.get(dirId).current) {
      const path = `${prefix}/${name}`;
      yield [path, id];
      if (this.nodes.get(id).kind === "dir") yield* this.walk(id, path);
    }
  }

  /** Each node some crash can reach, named by its smallest current path, else its smallest path
   * through durable or current entries (a file whose removal is not yet durable). */
  crashNames() {
    const names = new Map();
    for (const [path, id] of this.walk()) if (!names.has(id) || path < names.get(id)) names.set(id, path);
    const other = new Map();
    const stack = [["", ROOT]];
    const visited = new Set([ROOT]);
    while (stack.length > 0) {
      const [prefix, dirId] = stack.pop();
      const dir = this.nodes.get(dirId);
      for (const [name, id] of [...dir.current, ...dir.durable]) {
        const path = `${prefix}/${name}`;
        if (!other.has(id) || path < other.get(id)) other.set(id, path);
        if (this.nodes.get(id).kind === "dir" && !visited.has(id)) {
          visited.add(id);
          stack.push([path, id]);
        }
      }
    }
    return new Map([...other, ...names]);
  }

  /** The files a crash could change: `{path, bytes}` with bytes written since their last fsync. */
  unsynced() {
    const found = [];
    for (const [id, path] of this.crashNames()) {
      const node = this.nodes.get(id);
      if (node.kind === "file" && (node.kept < node.data.length || node.lost.length > 0)) {
        found.push({ path, bytes: node.data.length - node.kept });
      }
    }
    return found.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  }

  // --- crashing ---

  /** A new disk holding what survives a power cut now. `keep` is "none", "all" or
   * {path, bytes}: that file keeps that many of its unsynced bytes, everything else is dropped. */
  crash(keep) {
    const cuts = new Map();
    if (typeof keep === "object") {
      const target = this.unsynced().find((file) => file.path === keep.path);
      if (target === undefined) throw new RangeError(`${keep.path} is not a file with unsynced bytes`);
      if (!(keep.bytes >= 0 && keep.bytes <= target.bytes)) throw new RangeError(`${keep.path} has ${target.bytes} unsynced bytes, not ${keep.bytes}`);
      for (const [id, path] of this.crashNames()) if (path === keep.path) cuts.set(id, keep.bytes);
    }
    const keepAll = keep === "all";
    const after = new PowerLossDisk();
    const renumbered = new Map([[ROOT, ROOT]]);
    const stack = [ROOT];
    while (stack.length > 0) {
      const oldId = stack.pop();
      const oldDir = this.nodes.get(oldId);
      const newDir = after.nodes.get(renumbered.get(oldId));
      const entries = keepAll ? oldDir.current : oldDir.durable;
      for (const [name, childId] of [...entries].sort()) {
        if (!renumbered.has(childId)) {
          const child = this.nodes.get(childId);
          if (child.kind === "dir") {
            renumbered.set(childId, after.add({ kind: "dir", path: child.path, durable: new Map(), current: new Map() }));
            stack.push(childId);
          } else {
            const content = cuts.has(childId)
              ? child.data.subarray(0, child.kept + cuts.get(childId))
              : keepAll ? child.data : Buffer.concat([child.data.subarray(0, child.kept), child.lost]);
            renumbered.set(childId, after.add({ kind: "file", data: Buffer.from(content), kept: content.length, lost: Buffer.alloc(0), changed: 0n }));
          }
        }
        newDir.current.set(name, renumbered.get(childId));
      }
      newDir.durable = new Map(newDir.current);
    }
    return after;
  }
}
