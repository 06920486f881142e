/**
 * The web console of the dev Core (docs/operations.md "Web console"): a plain HTML/CSS/JS page at `/` over the
 * operator API. The page, its script and its style sheet are static text compiled into the binary (no file is
 * read at run time; the bundle stays one file) and hold no data: everything the console shows comes from the
 * operator API, which requires `Authorization: Bearer <operator token>` on every request.
 *
 * Authentication: the page's login form keeps the token in the tab's `sessionStorage` (gone when the tab
 * closes, never in a URL, a cookie or a log line) and sends it as the `Authorization` header on each `fetch`;
 * the live timeline reads the Server-Sent Events stream with `fetch` streaming (an `EventSource` cannot send a
 * header). No cookie is set, so no request is authenticated by the browser on its own (nothing to forge).
 *
 * Every answer carries a strict Content-Security-Policy (scripts and styles from this origin only, no inline
 * script, no framing, no form posts, connections to this origin only) and `nosniff`; the script renders
 * peer-provided text with `textContent` only.
 */
import { Effect, Layer } from "effect"
import { HttpRouter, HttpServerResponse } from "effect/http"
import { ConsoleFilesScript } from "./ConsoleFiles.js"
import { ConsoleHtml, ConsoleStyle } from "./ConsolePage.js"
import { ConsoleScript } from "./ConsoleScript.js"
import { ConsoleTimelineScript } from "./ConsoleTimeline.js"

/** The console's paths: the page and its two assets. */
export const ConsolePaths = { page: "/", script: "/console/app.js", style: "/console/app.css" } as const

/** The Content-Security-Policy of every console answer. */
export const ConsoleCsp = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "connect-src 'self'",
  "img-src 'self' data:",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'"
].join("; ")

/** Headers on every console answer. */
export const consoleHeaders = {
  "content-security-policy": ConsoleCsp,
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "x-frame-options": "DENY",
  "cache-control": "no-store"
} as const

/** The whole script: the shell, the Turn timeline and the Files hook, in one strict-mode function. */
export const consoleScript = (): string =>
  ["(function () {", "\"use strict\";", ConsoleScript, ConsoleTimelineScript, ConsoleFilesScript, "AW.start();", "})();", ""].join("\n")

const text = (body: string, contentType: string) =>
  Effect.succeed(HttpServerResponse.text(body, { contentType, headers: consoleHeaders }))

const methodNotAllowed = HttpServerResponse.jsonUnsafe(
  { error: "method_not_allowed", detail: "allowed: GET" },
  { status: 405, headers: { allow: "GET" } }
)

/** The console routes on the current `HttpRouter`: `GET /`, `GET /console/app.js`, `GET /console/app.css`. */
export const layer: Layer.Layer<never, never, HttpRouter.HttpRouter> = HttpRouter.use((router) =>
  Effect.gen(function* () {
    const script = consoleScript()
    yield* router.add("GET", ConsolePaths.page, text(ConsoleHtml, "text/html; charset=utf-8"))
    yield* router.add("GET", ConsolePaths.script, text(script, "text/javascript; charset=utf-8"))
    yield* router.add("GET", ConsolePaths.style, text(ConsoleStyle, "text/css; charset=utf-8"))
    // No icon: an empty answer instead of a 404 in every browser's console.
    yield* router.add("GET", "/favicon.ico", Effect.succeed(HttpServerResponse.empty({ status: 204, headers: consoleHeaders })))
    for (const path of Object.values(ConsolePaths)) {
      for (const method of ["POST", "PUT", "PATCH", "DELETE"] as const) {
        yield* router.add(method, path, Effect.succeed(methodNotAllowed))
      }
    }
  })
)
