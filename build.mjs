// esbuild: bundle the single-file binary dist/agentwire.mjs (daemon, dev Core, status, conformance).
// The banner gives CommonJS dependencies (ws) a real `require` inside the ESM bundle; without it esbuild's
// shim throws `Dynamic require of "events" is not supported` at startup.
import * as esbuild from "esbuild"
import { chmodSync, statSync, writeFileSync } from "node:fs"

const entries = { agentwire: "src/bin/agentwire.ts" }
if (process.argv.includes("--bench")) entries.bench = "bench/run.ts"

for (const [name, entry] of Object.entries(entries)) {
  const outfile = `dist/${name}.mjs`
  const result = await esbuild.build({
    entryPoints: [entry],
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node22",
    sourcemap: "linked",
    outfile,
    metafile: true,
    // ws requires these optional native add-ons inside try/catch; keep them external
    external: ["bufferutil", "utf-8-validate"],
    banner: {
      js: "#!/usr/bin/env node\nimport { createRequire as __cr } from 'node:module'; const require = __cr(import.meta.url);"
    },
    logLevel: "warning"
  })
  chmodSync(outfile, 0o755)
  writeFileSync(`dist/${name}.meta.json`, JSON.stringify(result.metafile))
  console.log(JSON.stringify({ outfile, bytes: statSync(outfile).size, warnings: result.warnings.length }))
}
