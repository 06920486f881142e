/**
 * Durable write reservations on PostgreSQL, each case in a schema of its own: the same cases as on SQLite,
 * including the start-up reconciliation with owner leases (a row of a device another live node owns stays).
 */
import { describe } from "@effect/vitest"
import { Layer, Redacted } from "effect"
import { DevIds } from "../../../../src/core/dev/DevIds.js"
import * as Store from "../../../../src/core/dev/Store.js"
import { describePostgres, withSchema } from "../../../support/postgres.js"
import { writeReservationCases } from "../cases/WriteReservationsCases.js"

describePostgres("WriteReservations on PostgreSQL", (url) => {
  describe("WriteReservations", () =>
    writeReservationCases(withSchema(url, (schema) => Store.layerPostgres({ url: Redacted.make(url), schema }).pipe(Layer.provide(DevIds.layerTest)))))
})
