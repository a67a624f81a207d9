// The `node:fs` that DSH's JSONL store sees under the crash seam: it imports `readdirSync` alone
// (to check that its root is readable). See fs-promises.mjs.

import { fsError } from "./disk.mjs";
import { seam } from "./fs-promises.mjs";

export function readdirSync(path) {
  const disk = seam.disk;
  disk.enter("readdirSync", path, false);
  const [, node] = disk.node(path, "scandir");
  if (node.kind !== "dir") throw fsError("ENOTDIR", "scandir", path);
  return [...node.current.keys()].sort();
}
