// esbuild: the single-file binary and the two library entry points.
//
//   dist/agentwire.mjs        the executable: a tiny launcher (src/bin/launcher.ts) that checks the Node version
//                             and then imports dist/agentwire-main.mjs (so an old Node gets one line, not a crash)
//   dist/agentwire-main.mjs   the binary (daemon, dev Core, status, conformance), every dependency bundled
//   dist/lib/proto.mjs        `agentwire/proto`   (effect is a peer dependency, not bundled)
//   dist/lib/gateway.mjs      `agentwire/gateway` (effect and @effect/platform-node are peer dependencies)
//   dist/types/…              their declarations (tsc), only with --lib (npm pack runs it through `prepack`)
//
// The banner gives CommonJS dependencies (ws) a real `require` inside the ESM bundle; without it esbuild's
// shim throws `Dynamic require of "events" is not supported` at startup.
import * as esbuild from "esbuild"
import { execFileSync } from "node:child_process"
import { chmodSync, rmSync, statSync, writeFileSync } from "node:fs"

const node = { platform: "node", format: "esm", target: "node22", logLevel: "warning" }
const report = (outfile, result) =>
  console.log(JSON.stringify({ outfile, bytes: statSync(outfile).size, warnings: result.warnings.length }))

const bundles = { "agentwire-main": "src/bin/agentwire.ts" }
if (process.argv.includes("--bench")) bundles.bench = "bench/run.ts"
// `npm run sim`: the deterministic simulator (docs/simulation.md), a test-only entry
if (process.argv.includes("--sim")) bundles.sim = "test/sim/main.ts"

for (const [name, entry] of Object.entries(bundles)) {
  const outfile = `dist/${name}.mjs`
  const result = await esbuild.build({
    ...node,
    entryPoints: [entry],
    bundle: true,
    sourcemap: "linked",
    outfile,
    metafile: true,
    // ws requires these optional native add-ons inside try/catch; keep them external
    external: ["bufferutil", "utf-8-validate"],
    banner: {
      js: "#!/usr/bin/env node\nimport { createRequire as __cr } from 'node:module'; const require = __cr(import.meta.url);"
    }
  })
  chmodSync(outfile, 0o755)
  writeFileSync(`dist/${name}.meta.json`, JSON.stringify(result.metafile))
  report(outfile, result)
}

// The executable: the launcher alone (no imports), so it runs on any Node.
{
  const outfile = "dist/agentwire.mjs"
  const result = await esbuild.build({
    ...node,
    target: "node16",
    entryPoints: ["src/bin/launcher.ts"],
    bundle: false,
    outfile,
    banner: { js: "#!/usr/bin/env node" }
  })
  chmodSync(outfile, 0o755)
  report(outfile, result)
}

// The libraries: our code bundled, every package import (effect, @effect/platform-node, ws) left to the host.
for (const [name, entry] of Object.entries({ proto: "src/proto/index.ts", gateway: "src/core/index.ts" })) {
  const outfile = `dist/lib/${name}.mjs`
  const result = await esbuild.build({ ...node, entryPoints: [entry], bundle: true, packages: "external", outfile })
  report(outfile, result)
}

if (process.argv.includes("--lib")) {
  rmSync("dist/types", { recursive: true, force: true })
  execFileSync(process.execPath, ["node_modules/typescript/bin/tsc", "-p", "tsconfig.lib.json"], { stdio: "inherit" })
  console.log(JSON.stringify({ types: "dist/types" }))
}
