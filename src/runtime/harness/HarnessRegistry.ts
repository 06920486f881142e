/**
 * The process-level registry of Harness kinds (protocol "Capability declarations"). Registration validates a
 * complete declaration (non-empty kind, all 30 capability fields explicit booleans, nothing unknown) before
 * changing anything; there is no implicit basic descriptor. The heartbeat declares exactly what is registered,
 * encoded with the proto codec so an incomplete declaration can never be sent. Admissions take a snapshot of
 * a declaration; a later registration never changes an existing owner's snapshot.
 *
 * The daemon builds it from registry entries (`layerFrom`, fed by the `HarnessKinds` table): each entry is a
 * Layer (`HarnessEntry`) built once in the registry layer's scope, so whatever a kind acquires for the daemon's
 * lifetime (a process supervisor, temporary directories, clients) is released when the daemon shuts down, after
 * every connection confirmed its cleanup.
 */
import { Context, Effect, Layer, Option, Result } from "effect"
import type { AgentKindDescriptor } from "../../proto/Capabilities.js"
import { decodeCapabilities, encodeCapabilities, InvalidDeclaration, supportedNames } from "../../proto/Capabilities.js"
import { sanitizeCause } from "../Ownership.js"
import { type Harness, type HarnessDeclaration, HarnessEntry, type HarnessLayer } from "./Harness.js"
import { traced } from "./TracedHarness.js"

/** Validates a declaration: a non-empty kind and a complete, strict capability record. */
export const validateDeclaration = (declaration: HarnessDeclaration): Result.Result<HarnessDeclaration, InvalidDeclaration> => {
  if (typeof declaration.kind !== "string" || declaration.kind.length === 0 || typeof declaration.available !== "boolean") {
    return Result.fail(new InvalidDeclaration({ reason: "incomplete_or_invalid" }))
  }
  return Result.map(decodeCapabilities(declaration.capabilities), (capabilities) => ({ ...declaration, capabilities }))
}

/** The heartbeat entry of a declaration; fails for an incomplete one, which is then never sent. */
export const toDescriptor = (declaration: HarnessDeclaration): Result.Result<AgentKindDescriptor, InvalidDeclaration> =>
  Result.map(encodeCapabilities(declaration.capabilities), (capabilities) =>
    declaration.version === undefined || declaration.version === ""
      ? { kind: declaration.kind, available: declaration.available, capabilities }
      : { kind: declaration.kind, available: declaration.available, version: declaration.version, capabilities })

export class HarnessRegistry extends Context.Service<HarnessRegistry, {
  /** Adds or replaces a kind. Fails with `InvalidDeclaration` and changes nothing when the declaration is incomplete. */
  readonly register: (harness: Harness) => Effect.Effect<void, InvalidDeclaration>
  /** The registered Harness of a kind. */
  readonly get: (kind: string) => Effect.Effect<Option.Option<Harness>>
  /** Every registered declaration, in registration order. */
  readonly declarations: Effect.Effect<ReadonlyArray<HarnessDeclaration>>
  /** The heartbeat's `supported_agent_kinds`: complete, codec-encoded declarations. */
  readonly descriptors: Effect.Effect<ReadonlyArray<AgentKindDescriptor>>
}>()("agentwire/runtime/HarnessRegistry") {
  /** A registry holding the given harnesses; fails (building nothing) if any declaration is incomplete. */
  static readonly make = (harnesses: ReadonlyArray<Harness>) =>
    Effect.gen(function* () {
      const kinds = new Map<string, Harness>()
      const register = (harness: Harness) =>
        Effect.gen(function* () {
          const declaration = yield* Effect.fromResult(validateDeclaration(harness.declaration))
          // Every native call runs in a `Harness.<operation>` span (TracedHarness.ts).
          kinds.set(declaration.kind, traced({ ...harness, declaration }))
        })
      for (const harness of harnesses) yield* register(harness)
      return HarnessRegistry.of({
        register,
        get: (kind) => Effect.sync(() => Option.fromNullishOr(kinds.get(kind))),
        declarations: Effect.sync(() => [...kinds.values()].map((h) => h.declaration)),
        descriptors: Effect.gen(function* () {
          const out: Array<AgentKindDescriptor> = []
          for (const harness of kinds.values()) {
            const descriptor = toDescriptor(harness.declaration)
            if (Result.isSuccess(descriptor)) out.push(descriptor.success)
            else yield* Effect.logError("declaration failed to encode; kind not advertised").pipe(
              Effect.annotateLogs({ kind: harness.declaration.kind })
            )
          }
          return out
        })
      })
    })

  static readonly layerWith = (harnesses: ReadonlyArray<Harness>) => Layer.effect(HarnessRegistry, HarnessRegistry.make(harnesses))

  /**
   * A registry built from its entries: each entry's Layer is built once, in order, in this layer's scope
   * (daemon lifetime), and torn down in reverse order when the layer is (daemon shutdown). An incomplete
   * declaration is a defect: the daemon cannot start with a kind it cannot declare completely.
   */
  static readonly layerFrom = <R>(entries: ReadonlyArray<HarnessLayer<R>>): Layer.Layer<HarnessRegistry, never, R> =>
    Layer.effect(
      HarnessRegistry,
      Effect.gen(function* () {
        const scope = yield* Effect.scope
        const harnesses = yield* Effect.forEach(entries, (entry) =>
          Effect.map(Layer.buildWithScope(entry, scope), (context) => Context.get(context, HarnessEntry)))
        return yield* HarnessRegistry.make(harnesses).pipe(Effect.orDie)
      })
    )
}

/**
 * The status-board view of a declaration: supported capability names in declaration order, and why the kind is
 * unavailable (sanitized and bounded like a cleanup cause: discovery may quote a binary's output). The reason is
 * shown by `agentwire status` only; it is never sent on the wire.
 */
export const kindStatus = (declaration: HarnessDeclaration) => ({
  kind: declaration.kind,
  available: declaration.available,
  ...(declaration.version === undefined || declaration.version === "" ? {} : { version: declaration.version }),
  ...(declaration.unavailableReason === undefined || declaration.unavailableReason === ""
    ? {}
    : { unavailable_reason: sanitizeCause(declaration.unavailableReason) }),
  supported: [...supportedNames(declaration.capabilities)]
})
