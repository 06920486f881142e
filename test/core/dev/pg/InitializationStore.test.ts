/** Session initialization records on PostgreSQL, each case in a schema of its own (the SQLite cases, unchanged). */
import { describe } from "@effect/vitest"
import { Layer, Redacted } from "effect"
import { DevIds } from "../../../../src/core/dev/DevIds.js"
import * as Store from "../../../../src/core/dev/Store.js"
import { describePostgres, withSchema } from "../../../support/postgres.js"
import { initializationCases } from "../cases/InitializationCases.js"

describePostgres("Session initialization records on PostgreSQL", (url) => {
  describe("session_initializations", () =>
    initializationCases(withSchema(url, (schema) => Store.layerPostgres({ url: Redacted.make(url), schema }).pipe(Layer.provide(DevIds.layerTest)))))
})
