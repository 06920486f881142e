/**
 * Protocol limits and timers. These are wire facts, not configuration: both sides import them and tests
 * override behaviour with layers, never by changing these values. Byte limits count UTF-8 bytes of the
 * encoded text unless the name says "decoded".
 */
import { Duration } from "effect"

const KiB = 1024
const MiB = 1024 * KiB

// ---------------------------------------------------------------------------------------------- frames

/** One WebSocket text frame carries one envelope of at most 4 MiB; larger frames are refused on both sides. */
export const MaxFrameBytes = 4 * MiB
/** Encoded request payloads of workspace_read / workspace_export (and any other bounded request) are at most 8 KiB. */
export const MaxRequestPayloadBytes = 8 * KiB
/** Every Envelope.id and correlation id is at most 128 bytes; a longer id is never echoed back. */
export const MaxCorrelationIdBytes = 128
/** Active-input ids (`prompt_steer.input_id`) are at most 256 bytes and not blank. */
export const MaxInputIdBytes = 256
/** Echoed trace metadata longer than this is omitted from replies. */
export const MaxEchoedTraceChars = 256
/**
 * Nesting depth of a frame's JSON: at most 128 open arrays / objects, the envelope object counting as 1 (so
 * a payload member may nest about 125 levels). Checked on the text before `JSON.parse` (JsonBounds.ts);
 * a deeper frame is refused as `too_deep`, and no message that deep is ever encoded.
 */
export const MaxJsonDepth = 128
/**
 * JSON values in one frame (the root, every array element and every object member value): at most 131,072.
 * A 4 MiB frame could otherwise hold about two million; a frame with more is refused as `too_many_nodes`.
 */
export const MaxJsonNodes = 131_072

// ---------------------------------------------------------------------------------------------- workspace

/** A directory listing carries at most 1024 entries. */
export const MaxDirectoryEntries = 1024
/** A directory entry name is at most 255 bytes, one path component. */
export const MaxEntryNameBytes = 255
/** Raw bytes of a workspace read result: at most 1 MiB within the 4 MiB frame. */
export const MaxReadResultBytes = 1 * MiB
/** Logical paths (write `path`, prepare `file.path`, setup `cwd`) are at most 4096 bytes. */
export const MaxPathBytes = 4096
/** Transfer chunks (runtime_prepare, workspace_write, workspace_export) carry at most 64 KiB of decoded data. */
export const MaxChunkBytes = 64 * KiB
/** An encoded workspace_write / workspace_export_result payload is at most 96 KiB. */
export const MaxTransferFramePayloadBytes = 96 * KiB
/** An encoded runtime_prepare begin payload is at most 1 MiB. */
export const MaxRuntimePrepareBeginBytes = 1 * MiB
/** Private transfer bound of runtime_prepare and workspace_write bodies: 50 MiB. */
export const MaxTransferBytes = 50 * MiB
/** Public inline write bound (decoded), checked by Core's API before any Runtime work: 5 MiB. */
export const MaxPublicInlineWriteBytes = 5 * MiB
/** A workspace export stream is at most 528 MiB (500 MiB of files plus archive overhead). */
export const MaxExportBytes = 528 * MiB
/** Concurrent workspace reads per connection. */
export const MaxConcurrentReads = 4
/** Plugin slots of runtime_prepare are 0..49. */
export const MaxPluginSlot = 49
/** Capability sources: at most 50 skills, 50 plugins and 50 directories. */
export const MaxCapabilitySources = 50
/** Initialization `env` and `packages` entries. */
export const MaxInitializationEntries = 1000

// ---------------------------------------------------------------------------------------------- admission

/** The Runtime keeps at most 64 admission records per connection. */
export const MaxAdmissionRecords = 64
/** An admission expires five minutes after it is granted; retries never extend it. */
export const AdmissionExpiry: Duration.Duration = Duration.minutes(5)
/** Core keeps at most 64 preparation subscriptions per connection. */
export const MaxPreparationSubscriptions = 64
/** Each preparation subscription buffers at most 16 statuses. */
export const PreparationSubscriptionBuffer = 16

// ---------------------------------------------------------------------------------------------- input

/** A Run holds at most 256 distinct active-input ids. */
export const MaxInputsPerRun = 256
/** Applied interaction decisions the Runtime remembers for replay (pruned after an hour when full). */
export const MaxAppliedDecisionRecords = 1024
/** Harness kinds one heartbeat may declare; a longer `supported_agent_kinds` makes the heartbeat invalid. */
export const MaxAgentKinds = 32
/** Function tools Core admits per request. */
export const MaxFunctionTools = 64
/** Function tool names are at most 512 bytes. */
export const MaxFunctionNameBytes = 512

// ---------------------------------------------------------------------------------------------- timers

/** The Runtime bounds the adapter's native input write at 10 s; the timer stops once the write completes. */
export const NativeWriteBudget: Duration.Duration = Duration.seconds(10)
/** Core waits at most 30 s from delivery for `written`; after that the input outcome is unknown. */
export const WrittenAckBudget: Duration.Duration = Duration.seconds(30)
/** Each receipt send has its own 5 s, shutdown-aware budget. */
export const ReceiptSendBudget: Duration.Duration = Duration.seconds(5)
/** Before done the Runtime waits at most 15 s (write + send budgets) for an in-flight input. */
export const InFlightInputBeforeDone: Duration.Duration = Duration.seconds(15)
/** Core records cancel_unconfirmed when no cancellation confirmation arrives within 15 s. */
export const CancelConfirmationBudget: Duration.Duration = Duration.seconds(15)
/** Core waits 15 s for an interaction or function-result acknowledgement. */
export const InteractionAckBudget: Duration.Duration = Duration.seconds(15)
/** Runtime wait for native settlement of a cancellation before answering cancel_timeout. */
export const CancelSettlementBudget: Duration.Duration = Duration.seconds(10)
/** Status sends have a 5 s budget each. */
export const StatusSendBudget: Duration.Duration = Duration.seconds(5)
/** Default heartbeat cadence when bootstrap returns none (or a value <= 0). */
export const DefaultHeartbeatInterval: Duration.Duration = Duration.seconds(15)
/** Core closes a connection after 60 s without any inbound frame. */
export const LivenessTimeout: Duration.Duration = Duration.seconds(60)
/** Per-frame write deadline on both sides. */
export const FrameWriteDeadline: Duration.Duration = Duration.seconds(10)
/** Core's outbound queue holds 64 envelopes per connection. */
export const CoreSendQueueCapacity = 64
/** A Run's output buffer in the Runtime holds 64 frames. */
export const RunOutputBuffer = 64
/** WebSocket upgrade handshake timeout of the daemon. */
export const HandshakeTimeout: Duration.Duration = Duration.seconds(10)
/** Runtime budget for the native workspace read operation. */
export const ReadNativeBudget: Duration.Duration = Duration.seconds(12)
/** Core wait for a workspace read result. */
export const ReadResultBudget: Duration.Duration = Duration.seconds(17)
/** Runtime budget for a whole write or runtime_prepare transfer. */
export const TransferBudget: Duration.Duration = Duration.seconds(120)
/** Core's overall budget for a write or runtime_prepare transfer. */
export const CoreTransferBudget: Duration.Duration = Duration.seconds(195)
/** Budget of a workspace export on each side. */
export const ExportBudget: Duration.Duration = Duration.seconds(180)

// ---------------------------------------------------------------------------------------------- close codes

/** WebSocket close code "runtime retired": permanent, the daemon exits rather than reconnecting. */
export const CloseRuntimeRetired = 4001
/** Courtesy close of a daemon that is shutting down. */
export const CloseNormal = 1000
