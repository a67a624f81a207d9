// Loads one installed DSH release (scripts/install-dsh.sh puts it in .tools/dsh/<version>/):
// its session core, and, where that release published them, the persistence coordinator, the
// JSONL store, the tool-result pruner, the compaction helpers (tool-pairing balance), the
// token meter and the session projection registry.

import { existsSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

/** Import `name` as installed under `modulesRoot`, or undefined when that release lacks it. */
async function importFrom(modulesRoot, name) {
  const packageJson = join(modulesRoot, "node_modules", name, "package.json");
  if (!existsSync(packageJson)) return undefined;
  const resolved = createRequire(join(modulesRoot, "package.json")).resolve(name);
  return import(pathToFileURL(resolved).href);
}

/** The token meter's contextBreakdown projection definition: the meter registers it with the
 * projection service when it starts, so it is caught by a stand-in service that records it. */
async function contextBreakdownProjection(cordis, tokenMeter) {
  if (cordis === undefined || tokenMeter === undefined) return undefined;
  const registered = [];
  class RecordingProjections extends cordis.Service {
    constructor(ctx) {
      super(ctx, "sessionProjections");
    }
    register(definition) {
      registered.push(definition);
      return () => {};
    }
  }
  const ctx = new cordis.Context();
  await ctx.plugin(RecordingProjections);
  await ctx.plugin(tokenMeter.TokenMeter);
  return registered.find((definition) => definition.key === "contextBreakdown");
}

/** The DSH modules the subject drives, and the installed dsh-session version. */
export async function loadDsh(modulesRoot) {
  const packageJson = join(modulesRoot, "node_modules", "@deepseek-ai", "dsh-session", "package.json");
  if (!existsSync(packageJson)) {
    throw new Error(`DSH is not installed in ${modulesRoot} (run: bash scripts/install-dsh.sh)`);
  }
  const modules = {
    version: JSON.parse(readFileSync(packageJson, "utf8")).version,
    cordis: await importFrom(modulesRoot, "@deepseek-ai/cordis"),
    session: await importFrom(modulesRoot, "@deepseek-ai/dsh-session"),
    persistence: await importFrom(modulesRoot, "@deepseek-ai/dsh-session-persistence"),
    jsonl: await importFrom(modulesRoot, "@deepseek-ai/dsh-session-persistence-jsonl"),
    pruner: await importFrom(modulesRoot, "@deepseek-ai/dsh-compaction-tool-result-pruner"),
    compaction: await importFrom(modulesRoot, "@deepseek-ai/dsh-compaction"),
    tokenMeter: await importFrom(modulesRoot, "@deepseek-ai/dsh-token-meter"),
    projection: await importFrom(modulesRoot, "@deepseek-ai/dsh-session-projection"),
    llm: await importFrom(modulesRoot, "@deepseek-ai/dsh-llm"),
    basic: await importFrom(modulesRoot, "@deepseek-ai/dsh-compaction-basic"),
    checkpointPolicy: await importFrom(modulesRoot, "@deepseek-ai/dsh-session-checkpoint-policy"),
    spillPolicy: await importFrom(modulesRoot, "@deepseek-ai/dsh-spill-policy"),
    spill: await importFrom(modulesRoot, "@deepseek-ai/dsh-spill"),
  };
  modules.shadowPrice = await contextBreakdownProjection(modules.cordis, modules.tokenMeter);
  return modules;
}
