/**
 * Codex engine error classification (reference harnesses.md §4.1): structured `codexErrorInfo` only, never
 * prose; unknown or malformed values stay unclassified. Also the launch-override rules (no secret on argv) and
 * the launch environment (provider keys held `Redacted` until the spawn).
 */
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Exit, Redacted } from "effect"
import { inspect } from "node:util"
import { classify, turnErrorPayload } from "../../../../src/runtime/harness/codex/CodexErrors.js"
import { processEnv } from "../../../../src/runtime/harness/codex/CodexExecutor.js"
import {
  CodexConfigInvalid,
  launchEnvironment,
  overridesFor,
  versionAtLeast
} from "../../../../src/runtime/harness/codex/CodexHarness.js"

describe("CodexErrors", () => {
  it("maps every codexErrorInfo variant of the table", () => {
    const table: ReadonlyArray<[unknown, ReturnType<typeof classify>]> = [
      [{ responseTooManyFailedAttempts: { httpStatusCode: 429 } }, { code: "rate_limit_exceeded" }],
      [{ responseTooManyFailedAttempts: { httpStatusCode: 502 } }, { code: "connection_failed", http_status: 502 }],
      ["usageLimitExceeded", { code: "usage_limit_exceeded" }],
      ["rateLimitExceeded", { code: "rate_limit_exceeded" }],
      ["serverOverloaded", { code: "server_overloaded" }],
      ["internalServerError", { code: "server_error" }],
      ["contextWindowExceeded", { code: "context_length_exceeded" }],
      ["cyberPolicy", { code: "cyber_policy" }],
      ["unauthorized", { code: "authentication_error" }],
      ["badRequest", { code: "invalid_request" }],
      ["modelNotFound", { code: "resource_not_found" }],
      [{ httpConnectionFailed: { httpStatusCode: 401 } }, { code: "authentication_error" }],
      [{ httpConnectionFailed: { httpStatusCode: 403 } }, { code: "authentication_error" }],
      [{ httpConnectionFailed: { httpStatusCode: 503 } }, { code: "connection_failed", http_status: 503 }],
      [{ responseStreamDisconnected: { httpStatusCode: null } }, { code: "connection_failed" }],
      [{ responseStreamConnectionFailed: { httpStatusCode: 1000 } }, { code: "connection_failed" }],
      ["other", {}],
      ["sessionBudgetExceeded", {}],
      [{ activeTurnNotSteerable: { turnKind: "review" } }, {}],
      [{ httpConnectionFailed: { httpStatusCode: 503 }, extra: 1 }, {}],
      ["somethingNew", {}],
      [null, {}],
      [42, {}],
      [[], {}]
    ]
    for (const [info, expected] of table) assert.deepStrictEqual(classify(info), expected, JSON.stringify(info))
  })

  it("never reads the message: prose that names a category stays unclassified", () => {
    assert.deepStrictEqual(turnErrorPayload({ message: "429 rate limit exceeded", codexErrorInfo: "other" }), {
      error: "429 rate limit exceeded"
    })
    assert.strictEqual(turnErrorPayload({ message: "x".repeat(5000) }).error.length, 1001)
  })
})

describe("CodexHarness launch overrides", () => {
  it.effect("forwards overrides and excludes every env_key variable from the commands Codex runs", () =>
    Effect.gen(function* () {
      const out = yield* overridesFor([`model_providers.p.env_key="MY_KEY"`, `model="m"`, `model_providers.q.env_key='OTHER'`])
      assert.deepStrictEqual(out, [
        `model_providers.p.env_key="MY_KEY"`,
        `model="m"`,
        `model_providers.q.env_key='OTHER'`,
        `shell_environment_policy.exclude=["MY_KEY","OTHER"]`
      ])
    }))

  it.effect("refuses a secret on the command line without echoing it, and a malformed entry", () =>
    Effect.gen(function* () {
      const exit = yield* Effect.exit(overridesFor([`model_providers.p.experimental_bearer_token="sk-live-123"`]))
      assert.deepStrictEqual(exit, Exit.fail(new CodexConfigInvalid({
        key: "model_providers.p.experimental_bearer_token",
        problem: "secrets never go on a command line; use env_key with an environment variable"
      })))
      assert.notInclude(JSON.stringify(exit), "sk-live-123")
      assert.isTrue(Exit.isFailure(yield* Effect.exit(overridesFor(["no-equals-sign"]))))
    }))

  it("holds each provider key Redacted apart from the launch environment and unwraps it only for the child", () => {
    const key = "sk-held-redacted-42"
    const launch = launchEnvironment(
      { PATH: "/bin", MY_KEY: key, AGENTWIRE_CREDENTIAL: "aw-cred", UNSET: undefined },
      [`model_providers.p.env_key="MY_KEY"`, `model="m"`]
    )
    assert.deepStrictEqual(launch.env, { PATH: "/bin" })
    assert.deepStrictEqual(Object.keys(launch.secrets), ["MY_KEY"])
    assert.isTrue(Redacted.isRedacted(launch.secrets["MY_KEY"]))
    for (const shown of [JSON.stringify(launch), String(launch.secrets["MY_KEY"]), inspect(launch, { depth: 5 })]) {
      assert.notInclude(shown, key)
    }
    const child = processEnv({ command: "codex", prefix: [], overrides: [], root: "/p", reconnectBudget: Duration.seconds(30), ...launch }, "/p/home")
    assert.deepStrictEqual(child, { PATH: "/bin", MY_KEY: key, CODEX_HOME: "/p/home" })
  })

  it("compares versions numerically", () => {
    assert.isTrue(versionAtLeast("0.171.0", "0.171.0"))
    assert.isTrue(versionAtLeast("0.172.0", "0.171.0"))
    assert.isTrue(versionAtLeast("1.0.0", "0.171.0"))
    assert.isFalse(versionAtLeast("0.170.9", "0.171.0"))
    assert.isFalse(versionAtLeast("0.99.0", "0.171.0"))
  })
})
