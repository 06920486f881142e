/** Session initialization records on SQLite (the same cases run on PostgreSQL: pg/InitializationStore.test.ts). */
import { describe } from "@effect/vitest"
import { Layer } from "effect"
import { DevIds } from "../../../src/core/dev/DevIds.js"
import * as Store from "../../../src/core/dev/Store.js"
import { initializationCases } from "./cases/InitializationCases.js"

describe("Session initialization records (SQLite)", () => {
  initializationCases(Store.layerFile(":memory:").pipe(Layer.provide(DevIds.layerTest)))
})
