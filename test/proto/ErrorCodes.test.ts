/**
 * Finite code sets and named limits against the lists and numbers the 0.10.0 reference gives. Each list
 * below is copied from the reference tables (part 1 §1.6, §6.5, §7.6, §8.6; part 2 §2.2, §3.6, §4.4, §6.3,
 * §7.3–§7.5, §8.1, §9), so a code or a limit that drifts from the reference fails here.
 */
import { assert, describe, it } from "@effect/vitest"
import { Duration } from "effect"
import { ErrorCodes, Limits, Preparation, RunEvents, RuntimePrepare, Workspace } from "../../src/proto/index.js"

const sorted = (values: Iterable<string>) => [...new Set(values)].sort()
const same = (actual: ReadonlyArray<string>, expected: ReadonlyArray<string>) => {
  assert.strictEqual(new Set(actual).size, actual.length, "no code is listed twice")
  assert.deepStrictEqual(sorted(actual), sorted(expected))
}

describe("ErrorCodes", () => {
  it("has exactly the 11 engine failure codes", () => {
    same(ErrorCodes.EngineFailureCode.literals, [
      "authentication_error",
      "rate_limit_exceeded",
      "usage_limit_exceeded",
      "server_overloaded",
      "server_error",
      "invalid_request",
      "resource_not_found",
      "request_timeout",
      "context_length_exceeded",
      "cyber_policy",
      "connection_failed"
    ])
    assert.strictEqual(ErrorCodes.EngineFailureCode.literals.length, 11)
  })

  it("has exactly the steer receipt codes, of which only not_ready and busy allow a resend", () => {
    const codes = [
      "not_ready",
      "busy",
      "in_flight",
      "invalid_input",
      "run_inactive",
      "input_conflict",
      "input_limit",
      "unsupported",
      "contract_violation",
      "rejected",
      "outcome_unknown"
    ] as const
    same(ErrorCodes.SteerErrorCode.literals, codes)
    assert.deepStrictEqual(codes.filter(ErrorCodes.isRetryableSteerCode), ["not_ready", "busy"])
  })

  it("has exactly the preparation codes of prepare, release, start and failed statuses", () => {
    const prepare = [
      "invalid_request",
      "invalid_configuration",
      "resource_unavailable",
      "unsupported_preparation",
      "unsupported_read_preparation",
      "unsupported_configuration",
      "request_conflict",
      "preparation_capacity",
      "session_binding_conflict",
      "configuration_conflict",
      "executor_cleanup_unconfirmed",
      "native_session_conflict",
      "history_unavailable",
      "executor_capacity"
    ]
    const release = ["invalid_release", "unknown_preparation"]
    const start = [
      "invalid_start",
      "resource_unavailable",
      "unknown_preparation",
      "read_only_preparation",
      "unknown_executor",
      "start_conflict",
      "preparation_not_ready",
      "run_conflict",
      "executor_unavailable",
      "executor_cleanup_unconfirmed",
      "start_cancelled"
    ]
    const failed = [
      "preparation_failed",
      "executor_cleanup_unconfirmed",
      "status_delivery_failed",
      "connection_closed",
      "start_cancelled",
      "cleanup_unconfirmed"
    ]
    same(ErrorCodes.PreparationErrorCode.literals, sorted([...prepare, ...release, ...start, ...failed]))
  })

  it("makes only preparation_capacity safe to retry", () => {
    assert.deepStrictEqual(ErrorCodes.PreparationErrorCode.literals.filter(ErrorCodes.isRetrySafePreparationCode), ["preparation_capacity"])
  })

  it("has the decision codes of the reference plus invalid_decision (I2)", () => {
    same(ErrorCodes.DecisionErrorCode.literals, [
      "not_pending",
      "not_ready",
      "unsupported",
      "contract_violation",
      "runtime_error",
      "decision_conflict",
      "invalid_decision"
    ])
  })

  it("has exactly the function-result acknowledgement codes", () => {
    same(ErrorCodes.FunctionResultErrorCode.literals, [
      "invalid_result",
      "not_ready",
      "unsupported",
      "contract_violation",
      "not_pending",
      "runtime_error",
      "decision_conflict"
    ])
  })

  it("has exactly the cancellation receipt codes, including the older not_ready", () => {
    same(ErrorCodes.CancelErrorCode.literals, [
      "run_inactive",
      "cancel_timeout",
      "cancel_failed",
      "cancel_output_unavailable",
      "cancel_outcome_unavailable",
      "not_ready"
    ])
  })

  it("accepts on an acknowledgement exactly the union of the decision, function-result and cancellation codes", () => {
    same(
      ErrorCodes.AckErrorCode.literals,
      sorted([
        ...ErrorCodes.DecisionErrorCode.literals,
        ...ErrorCodes.FunctionResultErrorCode.literals,
        ...ErrorCodes.CancelErrorCode.literals
      ])
    )
  })

  it("has exactly the transfer, read, write, export and suspension codes", () => {
    same(ErrorCodes.RuntimePrepareErrorCode.literals, [
      "invalid_request",
      "resource_unavailable",
      "runtime_preparation_capacity",
      "runtime_preparation_unsupported",
      "runtime_preparation_rejected",
      "runtime_preparation_failed",
      "runtime_preparation_unconfirmed"
    ])
    same(ErrorCodes.ReadErrorCode.literals, [
      "invalid_request",
      "resource_unavailable",
      "read_capacity",
      "read_unsupported",
      "not_found",
      "permission_denied",
      "not_directory",
      "read_unconfirmed"
    ])
    same(ErrorCodes.WriteErrorCode.literals, [
      "invalid_request",
      "resource_unavailable",
      "write_capacity",
      "write_unsupported",
      "write_rejected",
      "write_unconfirmed"
    ])
    same(ErrorCodes.ExportErrorCode.literals, ["invalid_request", "export_failed", "resource_unavailable", "read_unsupported"])
    same(ErrorCodes.SuspensionErrorCode.literals, ["invalid_request", "resource_busy", "not_suspended"])
  })

  it("has exactly the machine-route HTTP error codes", () => {
    same(ErrorCodes.HttpErrorCode.literals, [
      "missing_params",
      "missing_device_id",
      "bad_json",
      "missing_bearer",
      "unknown_device",
      "bad_credential",
      "wrong_runtime_type",
      "method_not_allowed",
      "incompatible_version",
      "internal"
    ])
  })
})

describe("finite value sets", () => {
  it("match the reference states and outcomes", () => {
    same(Preparation.PreparationState.literals, ["preparing", "ready", "starting", "started", "released", "expired", "failed", "rejected"])
    same(Preparation.ControlOperation.literals, ["execution_prepare", "execution_start", "execution_release"])
    same(RuntimePrepare.RuntimePrepareOutcome.literals, ["ready", "received", "completed", "rejected", "failed", "unknown"])
    same(RuntimePrepare.RuntimePrepareAction.literals, ["skill", "plugin", "file", "initialize", "finalize"])
    same(Workspace.ReadOutcome.literals, ["completed", "rejected", "unknown"])
    same(Workspace.WriteOutcome.literals, ["ready", "received", "completed", "rejected", "unknown"])
    same(Workspace.ExportOutcome.literals, ["chunk", "completed", "failed", "rejected"])
    same(Workspace.EntryKind.literals, ["file", "directory", "symlink", "other"])
    same(RunEvents.ToolCallStage.literals, ["before", "after"])
  })
})

describe("Limits", () => {
  const KiB = 1024
  const MiB = 1024 * KiB

  it("names the byte bounds of the reference", () => {
    assert.deepStrictEqual(
      {
        frame: Limits.MaxFrameBytes,
        request: Limits.MaxRequestPayloadBytes,
        correlationId: Limits.MaxCorrelationIdBytes,
        inputId: Limits.MaxInputIdBytes,
        trace: Limits.MaxEchoedTraceChars,
        entries: Limits.MaxDirectoryEntries,
        entryName: Limits.MaxEntryNameBytes,
        readResult: Limits.MaxReadResultBytes,
        path: Limits.MaxPathBytes,
        chunk: Limits.MaxChunkBytes,
        transferFrame: Limits.MaxTransferFramePayloadBytes,
        prepareBegin: Limits.MaxRuntimePrepareBeginBytes,
        transfer: Limits.MaxTransferBytes,
        publicInline: Limits.MaxPublicInlineWriteBytes,
        export: Limits.MaxExportBytes
      },
      {
        frame: 4_194_304,
        request: 8_192,
        correlationId: 128,
        inputId: 256,
        trace: 256,
        entries: 1024,
        entryName: 255,
        readResult: 1_048_576,
        path: 4096,
        chunk: 65_536,
        transferFrame: 98_304,
        prepareBegin: 1_048_576,
        transfer: 52_428_800,
        publicInline: 5_242_880,
        export: 553_648_128
      }
    )
    assert.strictEqual(Limits.MaxFrameBytes, 4 * MiB)
    assert.strictEqual(Limits.MaxTransferFramePayloadBytes, 96 * KiB)
  })

  it("names the counts of the reference", () => {
    assert.deepStrictEqual(
      [Limits.MaxAdmissionRecords, Limits.MaxInputsPerRun, Limits.MaxAppliedDecisionRecords, Limits.MaxFunctionTools, Limits.MaxFunctionNameBytes],
      [64, 256, 1024, 64, 512]
    )
    assert.deepStrictEqual([Limits.MaxConcurrentReads, Limits.MaxPluginSlot, Limits.MaxCapabilitySources, Limits.MaxInitializationEntries], [4, 49, 50, 1000])
    assert.deepStrictEqual([Limits.CoreSendQueueCapacity, Limits.RunOutputBuffer, Limits.MaxPreparationSubscriptions, Limits.PreparationSubscriptionBuffer], [64, 64, 64, 16])
    assert.deepStrictEqual([Limits.CloseRuntimeRetired, Limits.CloseNormal], [4001, 1000])
  })

  it("names the timers of the reference", () => {
    const ms = (d: Duration.Duration) => Duration.toMillis(d)
    assert.deepStrictEqual(
      {
        admission: ms(Limits.AdmissionExpiry),
        nativeWrite: ms(Limits.NativeWriteBudget),
        written: ms(Limits.WrittenAckBudget),
        receiptSend: ms(Limits.ReceiptSendBudget),
        beforeDone: ms(Limits.InFlightInputBeforeDone),
        cancel: ms(Limits.CancelConfirmationBudget),
        interactionAck: ms(Limits.InteractionAckBudget),
        cancelSettlement: ms(Limits.CancelSettlementBudget),
        statusSend: ms(Limits.StatusSendBudget),
        heartbeat: ms(Limits.DefaultHeartbeatInterval),
        liveness: ms(Limits.LivenessTimeout),
        frameWrite: ms(Limits.FrameWriteDeadline),
        handshake: ms(Limits.HandshakeTimeout),
        readNative: ms(Limits.ReadNativeBudget),
        readResult: ms(Limits.ReadResultBudget),
        transfer: ms(Limits.TransferBudget),
        coreTransfer: ms(Limits.CoreTransferBudget),
        export: ms(Limits.ExportBudget)
      },
      {
        admission: 300_000,
        nativeWrite: 10_000,
        written: 30_000,
        receiptSend: 5_000,
        beforeDone: 15_000,
        cancel: 15_000,
        interactionAck: 15_000,
        cancelSettlement: 10_000,
        statusSend: 5_000,
        heartbeat: 15_000,
        liveness: 60_000,
        frameWrite: 10_000,
        handshake: 10_000,
        readNative: 12_000,
        readResult: 17_000,
        transfer: 120_000,
        coreTransfer: 195_000,
        export: 180_000
      }
    )
  })
})
