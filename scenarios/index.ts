/**
 * Every wire scenario, in replay order (connection rules first, then admission, Runs, receipts, interactions
 * and connection loss; the scenarios that stop the Runtime for good come last, so a conformance kit serving one
 * Runtime process can run them after all others).
 */
import activeInputUnknown from "./active-input-unknown.js"
import activeInputWriteTimeout from "./active-input-write-timeout.js"
import activeInputWrittenAccepted from "./active-input-written-accepted.js"
import admissionExpiry from "./admission-expiry.js"
import badCredential from "./bad-credential.js"
import cancelTimeoutKeepsOwnership from "./cancel-timeout-keeps-ownership.js"
import cancelUnconfirmed from "./cancel-unconfirmed.js"
import cancellationSettlesWithoutDone from "./cancellation-settles-without-done.js"
import cancellationWaitsForSettlement from "./cancellation-waits-for-settlement.js"
import cleanupFailureKeptAndRetried from "./cleanup-failure-kept-and-retried.js"
import connectionLossNoInventedTerminal from "./connection-loss-no-invented-terminal.js"
import connectionReplacement from "./connection-replacement.js"
import decisionWaiterTimeout from "./decision-waiter-timeout.js"
import duplicateAndStaleReceipts from "./duplicate-and-stale-receipts.js"
import errorThenDone from "./error-then-done.js"
import functionResults from "./function-results.js"
import heartbeatAndDeclaration from "./heartbeat-and-declaration.js"
import incompatibleVersion from "./incompatible-version.js"
import interactionDecisionsInvalid from "./interaction-decisions-invalid.js"
import interactionDecisionsValid from "./interaction-decisions-valid.js"
import invalidHeartbeatCloses from "./invalid-heartbeat-closes.js"
import malformedRequests from "./malformed-requests.js"
import newerConnectionReplacesOlder from "./newer-connection-replaces-older.js"
import preparationCapacity from "./preparation-capacity.js"
import preparationCleanupUnconfirmed from "./preparation-cleanup-unconfirmed.js"
import preparationFailureCleansUp from "./preparation-failure-cleans-up.js"
import preparationReadyStartDone from "./preparation-ready-start-done.js"
import promptRequestEveryEvent from "./prompt-request-every-event.js"
import receiptsAfterDone from "./receipts-after-done.js"
import reconnectionWithoutReplay from "./reconnection-without-replay.js"
import releaseBeforeStart from "./release-before-start.js"
import shutdown from "./shutdown.js"
import staleAndDuplicateHandles from "./stale-and-duplicate-handles.js"
import strayFramesTolerated from "./stray-frames-tolerated.js"
import usageSnapshots from "./usage-snapshots.js"
import workspaceReadBytesAndDirectory from "./workspace-read-bytes-and-directory.js"
import workspaceReadUnknownNoReplay from "./workspace-read-unknown-no-replay.js"
import workspaceWriteTransfer from "./workspace-write-transfer.js"
import workspaceWriteUnconfirmed from "./workspace-write-unconfirmed.js"
import runtimePrepareTransfer from "./runtime-prepare-transfer.js"
import runtimePrepareUnknownNoReplay from "./runtime-prepare-unknown-no-replay.js"
import workspaceExportPull from "./workspace-export-pull.js"
import workspaceExportFailedAndRefused from "./workspace-export-failed-and-refused.js"
import boundedTransferValidation from "./bounded-transfer-validation.js"
import mcpConnectionAuthority from "./mcp-connection-authority.js"
import suspensionQuiesceBusy from "./suspension-quiesce-busy.js"
import suspensionFencingAcrossReconnect from "./suspension-fencing-across-reconnect.js"
import type { WireScenario } from "./WireScenario.js"

export * from "./WireScenario.js"

export const allScenarios: ReadonlyArray<WireScenario> = [
  heartbeatAndDeclaration,
  invalidHeartbeatCloses,
  strayFramesTolerated,
  malformedRequests,
  preparationReadyStartDone,
  preparationFailureCleansUp,
  preparationCleanupUnconfirmed,
  preparationCapacity,
  releaseBeforeStart,
  admissionExpiry,
  staleAndDuplicateHandles,
  promptRequestEveryEvent,
  errorThenDone,
  usageSnapshots,
  cancellationWaitsForSettlement,
  cancellationSettlesWithoutDone,
  cancelUnconfirmed,
  cancelTimeoutKeepsOwnership,
  activeInputWrittenAccepted,
  activeInputWriteTimeout,
  activeInputUnknown,
  duplicateAndStaleReceipts,
  receiptsAfterDone,
  interactionDecisionsValid,
  interactionDecisionsInvalid,
  decisionWaiterTimeout,
  functionResults,
  mcpConnectionAuthority,
  cleanupFailureKeptAndRetried,
  connectionLossNoInventedTerminal,
  reconnectionWithoutReplay,
  connectionReplacement,
  newerConnectionReplacesOlder,
  shutdown,
  incompatibleVersion,
  badCredential,
  workspaceReadBytesAndDirectory,
  workspaceReadUnknownNoReplay,
  workspaceWriteTransfer,
  workspaceWriteUnconfirmed,
  runtimePrepareTransfer,
  runtimePrepareUnknownNoReplay,
  workspaceExportPull,
  workspaceExportFailedAndRefused,
  boundedTransferValidation,
  suspensionQuiesceBusy,
  suspensionFencingAcrossReconnect
]

/** A scenario by name. */
export const scenarioNamed = (name: string): WireScenario | undefined => allScenarios.find((s) => s.name === name)
