/**
 * The wire version. Core accepts only an exact string match, patch included: no semver parsing, no
 * prerelease or build-metadata tolerance (protocol "Ownership and connection"). The wire version is
 * independent of the Runtime build version that heartbeats report as `daemon_version`.
 */

/** The wire version this package speaks. */
export const ProtocolVersion = "0.10.0" as const
export type ProtocolVersion = typeof ProtocolVersion

/**
 * True exactly when `peer` is byte-for-byte the wire version. `"0.10"`, `"0.10.0-dev"`, `"0.10.0+build"`,
 * `" 0.10.0"` and `"0.10.1"` are all incompatible.
 */
export const isCompatible = (peer: string | null | undefined): peer is ProtocolVersion => peer === ProtocolVersion

/** Versions the shared contract fixture says Core must reject (besides any other non-equal string). */
export const rejectedVersionsFixture: ReadonlyArray<string> = [
  "0.7.0",
  "0.8.99",
  "0.8.",
  `${ProtocolVersion}-dev`,
  `${ProtocolVersion}+build`,
  "0.10",
  "0.10.1",
  "0.9.0",
  "0.13.0",
  ""
]
