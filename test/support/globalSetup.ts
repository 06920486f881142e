/**
 * Builds dist/agentwire.mjs once before the suite, so end-to-end tests run the real single-file binary.
 */
import { execFileSync } from "node:child_process"
import { resolve } from "node:path"

export default function setup() {
  execFileSync(process.execPath, [resolve(import.meta.dirname, "../../build.mjs")], { stdio: "ignore" })
}
