import { encodeChunkFrame } from "../src/proto/EncodedFrame.js"
import { encodeMessage } from "../src/proto/Messages.js"
const body = Uint8Array.from({ length: 65536 }, (_, i) => (i * 2654435761) >>> 24)
const m = { type: "runtime_prepare", id: "5f0c2d8e-9a41-4b37-8e6d-1c2f3a4b5d6e", payload: { step: "chunk", offset: 65536 }, trace: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" } as any
const recv = { type: "runtime_prepare_result", id: "5f0c2d8e-9a41-4b37-8e6d-1c2f3a4b5d6e", payload: { outcome: "received", offset: 65536 }, trace: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" } as any
const T = (n: string, f: () => unknown) => { f(); let best = 1e9; for (let r = 0; r < 20; r++) { const t0 = process.hrtime.bigint(); for (let i = 0; i < 200; i++) f(); best = Math.min(best, Number(process.hrtime.bigint() - t0) / 200 / 1000) } console.log(n, best.toFixed(2)) }
T("encodeChunkFrame", () => encodeChunkFrame(m, body))
T("encodeMessage probe", () => encodeMessage({ ...m, payload: { ...m.payload, data: "" } }))
T("b64 toString", () => Buffer.from(body.buffer, body.byteOffset, body.byteLength).toString("base64"))
T("encodeMessage receipt", () => encodeMessage(recv))
const id = new Uint8Array(Buffer.from("5f0c2d8e-9a41-4b37-8e6d-1c2f3a4b5d6e"))
T("fromCharCode spread", () => String.fromCharCode(...id))
const td = new TextDecoder()
T("TextDecoder", () => td.decode(id))
T("loop", () => { let s = ""; for (let i = 0; i < id.length; i++) s += String.fromCharCode(id[i]!); return s })
