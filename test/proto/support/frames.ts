/**
 * Small helpers shared by the proto contract tests: decode by direction, build the exact `InvalidFrame` a
 * refused frame must produce, and unwrap results with a readable failure.
 */
import { assert } from "@effect/vitest"
import { Result, type Schema } from "effect"
import { Envelope, Messages } from "../../../src/proto/index.js"

export type Direction = "coreToRuntime" | "runtimeToCore"

export const other = (direction: Direction): Direction =>
  direction === "coreToRuntime" ? "runtimeToCore" : "coreToRuntime"

/** One catalogue entry, seen generically. */
export interface Definition {
  readonly schema: Schema.Top
  readonly id: "required" | "optional" | "none"
  readonly payload: boolean
  readonly maxPayloadBytes?: number
}

export const catalogueOf = (direction: Direction): Readonly<Record<string, Definition>> =>
  direction === "coreToRuntime" ? Messages.coreToRuntime : Messages.runtimeToCore

/** Both decode steps for a frame received in `direction`. */
export const decode = (
  direction: Direction,
  frame: string | Uint8Array
): Result.Result<Messages.Message, Envelope.InvalidFrame> =>
  direction === "coreToRuntime" ? Messages.decodeCoreToRuntime(frame) : Messages.decodeRuntimeToCore(frame)

export const utf8Bytes = (text: string): number => new TextEncoder().encode(text).length

/** The exact error a refused text frame must produce. */
export const invalidFrame = (
  frame: string,
  fields: { readonly code: Envelope.InvalidFrameCode; readonly type?: string; readonly id?: string }
): Envelope.InvalidFrame => new Envelope.InvalidFrame({ ...fields, bytes: utf8Bytes(frame) })

/** The success value, or a test failure naming the error. */
export const getOk = <A, E>(result: Result.Result<A, E>): A => {
  if (Result.isFailure(result)) assert.fail(`expected success, got ${String(result.failure)}`)
  return result.success
}

/** The failure value, or a test failure. */
export const getErr = <A, E>(result: Result.Result<A, E>): E => {
  if (Result.isSuccess(result)) assert.fail("expected a failure, got a success")
  return result.failure
}

/** Encodes a message, failing the test when the encoder refuses it. */
export const encode = (message: Messages.Message): string => getOk(Messages.encodeMessage(message))
