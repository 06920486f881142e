import { describe } from "@effect/vitest"
import { Layer } from "effect"
import { DevIds } from "../../../src/core/dev/DevIds.js"
import * as Store from "../../../src/core/dev/Store.js"
import { recoveryCases } from "./cases/RecoveryCases.js"

describe("Recovery", () => recoveryCases(Store.layerFile(":memory:").pipe(Layer.provide(DevIds.layerTest))))
