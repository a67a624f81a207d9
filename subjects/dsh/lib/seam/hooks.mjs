// Module substitution for the crash seam: DSH's JSONL store imports `node:fs/promises` and
// `node:fs`; under the seam those two imports, and only when the importer is that store's own
// module, resolve to our simulated-disk faces instead. DSH's code is unchanged: this is Node's
// documented in-thread resolve hook (module.registerHooks, Node >= 22.15).

import { registerHooks } from "node:module";

const STORE_PACKAGE = "/@deepseek-ai/dsh-session-persistence-jsonl/";
const FACES = {
  "node:fs/promises": new URL("./fs-promises.mjs", import.meta.url).href,
  "fs/promises": new URL("./fs-promises.mjs", import.meta.url).href,
  "node:fs": new URL("./fs.mjs", import.meta.url).href,
  fs: new URL("./fs.mjs", import.meta.url).href,
};

/** Route the JSONL store's file-system imports to the simulated disk. */
export function installSeam() {
  registerHooks({
    resolve(specifier, context, nextResolve) {
      const face = FACES[specifier];
      if (face !== undefined && context.parentURL?.includes(STORE_PACKAGE)) return { url: face, shortCircuit: true };
      return nextResolve(specifier, context);
    },
  });
}
