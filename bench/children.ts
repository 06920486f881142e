/**
 * Roles the bench bundle plays when spawned as a child process (`--child=<role>`).
 */
import { gatewayHost } from "./children/gatewayHost.js"
import { load } from "./children/load.js"
import { rawReceiver } from "./children/rawReceiver.js"
import { runtimePeer } from "./children/runtimePeer.js"
import { transferPeer } from "./children/transferPeer.js"

export const runChild = async (role: string, _argv: ReadonlyArray<string>): Promise<void> => {
  switch (role) {
    case "runtime-peer":
      return runtimePeer()
    case "gateway-host":
      return gatewayHost()
    case "load":
      return load()
    case "raw-receiver":
      return rawReceiver()
    case "transfer-peer":
      return transferPeer()
    default:
      throw new Error(`unknown bench child role: ${role}`)
  }
}
