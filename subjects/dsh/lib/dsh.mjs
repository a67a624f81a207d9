// Loads one installed DSH release (scripts/install-dsh.sh puts it in .tools/dsh/<version>/):
// its session core, and, where that release published them, the persistence coordinator, the
// JSONL store, the tool-result pruner, the compaction helpers (tool-pairing balance), the
// token meter and the session projection registry.

import { existsSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

/** Import `name` (a package, or a package's export like `@scope/pkg/invariant`) as installed under
 * `modulesRoot`, or undefined when that release lacks the package. */
async function importFrom(modulesRoot, name) {
  const packageName = name.split("/").slice(0, name.startsWith("@") ? 2 : 1).join("/");
  const packageJson = join(modulesRoot, "node_modules", packageName, "package.json");
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

/** The invariant companions of the packages the subject drives that check the session log (the
 * others' companions are empty installers: "No runtime invariant"). */
const INVARIANT_COMPANIONS = ["@deepseek-ai/dsh-session/invariant", "@deepseek-ai/dsh-compaction/invariant"];

/** The profile "DSH with invariants": `SessionStore` plugged together with DSH's invariant registry
 * (`@deepseek-ai/dsh-invariants`, enabled) and the companions above, as DSH's README composes them;
 * a violated invariant throws DSH's `InvariantError` before the event is committed. Also returns the
 * companions and `InvariantError`, which the subject's check_log drives on a whole log (pure.mjs). */
async function withInvariants(modulesRoot, session) {
  const registry = await importFrom(modulesRoot, "@deepseek-ai/dsh-invariants");
  if (registry === undefined) throw new Error(`@deepseek-ai/dsh-invariants is not installed in ${modulesRoot}`);
  const companions = [];
  for (const name of INVARIANT_COMPANIONS) {
    const companion = await importFrom(modulesRoot, name);
    if (companion !== undefined) companions.push(companion);
  }
  const SessionStore = {
    name: "session-store-with-invariants",
    async apply(ctx) {
      await ctx.plugin(session.SessionStore);
      await ctx.plugin(registry.InvariantRegistry, { enabled: true });
      for (const companion of companions) await ctx.plugin(companion);
    },
  };
  return { session: { ...session, SessionStore }, companions, InvariantError: registry.InvariantError };
}

/** The DSH modules the subject drives, and the installed dsh-session version; with `invariants`,
 * DSH's optional invariant checks are enabled (the profile "DSH with invariants"). */
export async function loadDsh(modulesRoot, { invariants = false } = {}) {
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
  if (invariants) {
    const loaded = await withInvariants(modulesRoot, modules.session);
    modules.session = loaded.session;
    modules.companions = loaded.companions;
    modules.InvariantError = loaded.InvariantError;
  }
  modules.invariants = invariants;
  modules.shadowPrice = await contextBreakdownProjection(modules.cordis, modules.tokenMeter);
  return modules;
}
