/** The build version of agentwire (independent of the wire version in src/proto/Version.ts). */
export const AgentwireVersion = "0.1.0"
