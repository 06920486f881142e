/**
 * Shared rules of the acknowledged chunk transfers (runtime_prepare, workspace_write, workspace_export):
 * base64 chunk data, offsets that must equal the bytes received so far, declared sizes, digests and the
 * logical paths the transfers name. Pure functions returning finite codes; both sides call them.
 */
import { Option, Result } from "effect"
import { fitsUtf8Bytes } from "./Checks.js"
import { decodeStrict, encode } from "./internal/base64.js"
import { MaxChunkBytes, MaxPathBytes } from "./Limits.js"

/** Why a chunk, size or path is invalid. */
export type TransferIssue =
  | "offset_mismatch" // the chunk does not start where the previous one ended
  | "empty_chunk"
  | "chunk_too_large" // more than 64 KiB decoded
  | "overflow" // the chunk goes past the declared size or the transfer bound
  | "bad_base64"
  | "short_body" // commit before every declared byte arrived
  | "digest_mismatch"
  | "size_out_of_range"

/**
 * Decodes standard padded base64 chunk data; non-canonical encodings are rejected (`internal/base64.ts`: one
 * pass, native where the host has Node's `Buffer`).
 */
export const decodeChunkData = (data: string): Result.Result<Uint8Array, "bad_base64"> => {
  const decoded = decodeStrict(data)
  return decoded === undefined ? Result.fail("bad_base64") : Result.succeed(decoded)
}

/** Encodes chunk bytes as standard padded base64. */
export const encodeChunkData = (bytes: Uint8Array): string => encode(bytes)

/**
 * Checks one chunk against the transfer so far: it must start at `received`, carry 1..64 KiB and end at or
 * before `declaredSize` (and the transfer bound). Returns the new total on success.
 */
export const checkChunk = (
  state: { readonly received: number; readonly declaredSize: number; readonly maxTotal: number },
  chunk: { readonly offset: number; readonly length: number }
): Result.Result<number, TransferIssue> => {
  if (chunk.offset !== state.received) return Result.fail("offset_mismatch")
  if (chunk.length === 0) return Result.fail("empty_chunk")
  if (chunk.length > MaxChunkBytes) return Result.fail("chunk_too_large")
  const total = state.received + chunk.length
  if (total > state.declaredSize || total > state.maxTotal) return Result.fail("overflow")
  return Result.succeed(total)
}

/** Checks a commit: every declared byte arrived and the digest of the body matches. */
export const checkCommit = (
  state: { readonly received: number; readonly declaredSize: number; readonly declaredSha256: string },
  actualSha256: string
): Option.Option<TransferIssue> =>
  state.received !== state.declaredSize
    ? Option.some("short_body")
    : actualSha256 !== state.declaredSha256
    ? Option.some("digest_mismatch")
    : Option.none()

// ---------------------------------------------------------------------------------------------- paths

/** Why a path is invalid. */
export type PathIssue =
  | "empty"
  | "absolute" // a workspace-relative path starting with "/"
  | "not_under_workspace" // a logical absolute path outside /workspace
  | "dot_segment" // "." or ".." element
  | "empty_segment" // doubled or trailing slash
  | "forbidden_character" // backslash, NUL, CR or LF
  | "too_long" // over 4096 UTF-8 bytes

const FORBIDDEN = /[\\\u0000\r\n]/

const checkSegments = (segments: ReadonlyArray<string>): PathIssue | undefined => {
  for (const segment of segments) {
    if (segment === "") return "empty_segment"
    if (segment === "." || segment === "..") return "dot_segment"
  }
  return undefined
}

/**
 * A workspace-relative path (workspace_write `path`, workspace_read `path`): slash-separated, no leading
 * slash, no empty, "." or ".." element, at most 4096 bytes, no backslash, NUL, CR or LF. The empty path
 * (the root) is allowed only where `allowRoot` says so (directory reads).
 */
export const validateRelativePath = (path: string, options: { readonly allowRoot: boolean }): Option.Option<PathIssue> => {
  if (path === "") return options.allowRoot ? Option.none() : Option.some("empty")
  if (!fitsUtf8Bytes(path, MaxPathBytes)) return Option.some("too_long")
  if (FORBIDDEN.test(path)) return Option.some("forbidden_character")
  if (path.startsWith("/")) return Option.some("absolute")
  const issue = checkSegments(path.split("/"))
  return issue === undefined ? Option.none() : Option.some(issue)
}

/**
 * A logical absolute path (runtime_prepare `file.path`, setup `cwd`): under `/workspace/`, already clean,
 * at most 4096 bytes, no backslash, NUL, CR or LF. `/workspace` itself is allowed only where `allowRoot`.
 */
export const validateLogicalPath = (path: string, options: { readonly allowRoot: boolean }): Option.Option<PathIssue> => {
  if (path === "") return Option.some("empty")
  if (!fitsUtf8Bytes(path, MaxPathBytes)) return Option.some("too_long")
  if (FORBIDDEN.test(path)) return Option.some("forbidden_character")
  if (path === "/workspace") return options.allowRoot ? Option.none() : Option.some("not_under_workspace")
  if (!path.startsWith("/workspace/")) return Option.some("not_under_workspace")
  const issue = checkSegments(path.slice("/workspace/".length).split("/"))
  return issue === undefined ? Option.none() : Option.some(issue)
}
