/**
 * The `agentwire` executable (dist/agentwire.mjs): checks the Node.js version, then loads the real binary
 * (dist/agentwire-main.mjs, bundled from ./agentwire.ts). It is a separate file with no static imports, so an
 * unsupported Node prints one line and exits 2 before anything imports `node:sqlite` or `effect`.
 */
export const MinimumNode = { major: 22, minor: 19 } as const

/** Whether `version` (`process.versions.node`, e.g. "22.19.0") can run agentwire. */
export const supportedNode = (version: string): boolean => {
  const [major = 0, minor = 0] = version.split(".").map((part) => Number.parseInt(part, 10))
  return major > MinimumNode.major || (major === MinimumNode.major && minor >= MinimumNode.minor)
}

if (!supportedNode(process.versions.node)) {
  process.stderr.write(
    `agentwire: Node.js >= ${MinimumNode.major}.${MinimumNode.minor} is required (this is ${process.version}); install a newer Node.js\n`
  )
  process.exit(2)
} else {
  // A computed specifier: the bundler leaves it alone and Node resolves it beside this file at run time.
  const main = "./agentwire-main.mjs"
  await import(main)
}
