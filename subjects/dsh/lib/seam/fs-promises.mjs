// The `node:fs/promises` that DSH's JSONL store sees under the crash seam (hooks.mjs substitutes
// this module for that one store's imports only). Each function is the Node API DSH calls, on the
// simulated disk `seam.disk` (disk.mjs), with Node's shapes: FileHandle, Dirent, Stats, errors
// carrying `code`. Only what DSH's store imports is here; anything else fails to link, loudly.

import { fsError, PowerLossDisk } from "./disk.mjs";

/** The disk every call goes to; the subject swaps it for the survivor of a crash. */
export const seam = { disk: new PowerLossDisk() };

class FileHandle {
  constructor(id, path, flags) {
    this.id = id;
    this.path = path;
    this.flags = flags;
    this.position = 0; // the read position of read(buffer, offset, length, null)
    this.closed = false;
  }

  live() {
    if (this.closed) throw fsError("EBADF", "write", this.path);
    return seam.disk;
  }

  async writeFile(data) {
    const disk = this.live();
    disk.write(this.id, this.path, Buffer.from(data));
  }

  async sync() {
    this.live().fsync(this.id, this.path);
  }

  async stat(options) {
    const disk = this.live();
    disk.enter("fstat", this.path, false);
    return statsOf(this.id, disk.nodes.get(this.id), options);
  }

  async truncate(size = 0) {
    this.live().truncate(this.id, this.path, size);
  }

  async read(buffer, offset = 0, length = buffer.length - offset, position = null) {
    const disk = this.live();
    disk.enter("read", this.path, false);
    const data = disk.nodes.get(this.id).data;
    const from = position ?? this.position;
    const bytes = data.subarray(from, from + length);
    bytes.copy(buffer, offset);
    if (position === null) this.position += bytes.length;
    return { bytesRead: bytes.length, buffer };
  }

  async close() {
    if (this.closed) return;
    seam.disk.enter("close", this.path, false);
    this.closed = true;
  }
}

function statsOf(id, node, options) {
  const big = options?.bigint === true;
  const number = (value) => (big ? BigInt(value) : Number(value));
  const size = node.kind === "file" ? node.data.length : 4096;
  const changed = node.kind === "file" ? node.changed : 0n;
  return {
    dev: number(1), ino: number(id), size: number(size),
    mtimeNs: changed, ctimeNs: changed, mtimeMs: number(changed), ctimeMs: number(changed),
    isDirectory: () => node.kind === "dir",
    isFile: () => node.kind === "file",
  };
}

export async function open(path, flags = "r") {
  const disk = seam.disk;
  disk.enter("open", path, false);
  let id = disk.find(path);
  if (flags === "wx" && id !== undefined) throw fsError("EEXIST", "open", path);
  if (id === undefined) {
    if (flags === "r" || flags === "r+") {
      disk.node(path, "open"); // ENOENT, or ENOTDIR for a parent that is a file
    }
    id = disk.create(path);
  } else if (flags !== "r" && disk.nodes.get(id).kind === "dir") {
    throw fsError("EISDIR", "open", path);
  }
  return new FileHandle(id, path, flags);
}

export async function readFile(path) {
  const disk = seam.disk;
  disk.enter("readFile", path, false);
  const [, node] = disk.file(path, "open");
  return Buffer.from(node.data);
}

export async function stat(path, options) {
  const disk = seam.disk;
  disk.enter("stat", path, false);
  const [id, node] = disk.node(path, "stat");
  return statsOf(id, node, options);
}

export async function readdir(path, options) {
  const disk = seam.disk;
  disk.enter("readdir", path, false);
  const [, node] = disk.node(path, "scandir");
  if (node.kind !== "dir") throw fsError("ENOTDIR", "scandir", path);
  const names = [...node.current.keys()].sort();
  if (options?.withFileTypes !== true) return names;
  return names.map((name) => {
    const child = disk.nodes.get(node.current.get(name));
    return { name, parentPath: path, path, isDirectory: () => child.kind === "dir", isFile: () => child.kind === "file" };
  });
}

export async function mkdir(path, options) {
  seam.disk.mkdir(path, options?.recursive === true);
}

export async function link(existingPath, newPath) {
  seam.disk.link(existingPath, newPath);
}

export async function rm(path, options) {
  const disk = seam.disk;
  if (disk.find(path) === undefined && options?.force === true) {
    disk.enter("rm", path, false);
    return;
  }
  disk.remove(path);
}

export async function truncate(path, size = 0) {
  const disk = seam.disk;
  const [id] = disk.file(path, "open");
  disk.truncate(id, path, size);
}

export async function realpath(path) {
  const disk = seam.disk;
  disk.enter("realpath", path, false);
  disk.node(path, "realpath");
  return path;
}

export async function mkdtemp(prefix) {
  throw fsError("EPERM", "mkdtemp", prefix); // DSH calls it on Windows only
}
