/**
 * Durable write reservations on the SQLite store (the same cases run on PostgreSQL in
 * test/core/dev/pg/WriteReservations.test.ts).
 */
import { describe } from "@effect/vitest"
import { Layer } from "effect"
import { DevIds } from "../../../src/core/dev/DevIds.js"
import * as Store from "../../../src/core/dev/Store.js"
import { writeReservationCases } from "./cases/WriteReservationsCases.js"

describe("WriteReservations", () => writeReservationCases(Store.layerFile(":memory:").pipe(Layer.provide(DevIds.layerTest))))
