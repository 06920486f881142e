/**
 * The web console end to end in headless Chromium (test/support/chromium.ts): a real `agentwire core` and a
 * real daemon (scripted harness) as child processes; the browser logs in with the operator token, sees the
 * device with its declaration, creates a Session, starts a Turn whose timeline fills live, and steers,
 * cancels and answers a permission with the page's buttons. Peer text is rendered as text (an HTML payload
 * never becomes an element), the token never appears in a URL the browser requested nor in a log line, and
 * screenshots of the main pages are real pictures (dimensions, not blank). Nothing is stored in git:
 * screenshots go to a temporary directory.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { readFileSync, rmSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import type { Browser, BrowserContext, Page, Route } from "playwright-core"
import { launchChromium, readPng, skipChromium } from "../support/chromium.js"
import { type CoreProc, createCredential, eventually, operator, type Proc, script, startCore, startDaemon, stopAll, tempDir } from "../support/devcoreLive.js"

const skip = skipChromium()

let dir: string
let core: CoreProc
let daemon: Proc
let token: string
let browser: Browser
let context: BrowserContext
let page: Page
const requested: Array<string> = []

const login = async (value: string) => {
  await page.goto(core.url + "/")
  await page.locator("#token").fill(value)
  await page.locator("#login-form button[type=submit]").click()
}

const startTurn = async (steps: ReadonlyArray<unknown>) => {
  const api = operator(core.url, token)
  const session = await api.post("/sessions", { agent_kind: "scripted" })
  const turn = await api.post(`/sessions/${session.body.session_id}/turns`, { input: script(steps) })
  assert.strictEqual(turn.status, 202)
  return turn.body.turn_id as string
}

/** The text of the timeline rows, one string per row. */
const timeline = () => page.locator("#timeline li").allTextContents()

describe.skipIf(skip)("web console in headless Chromium (end to end)", () => {
  beforeAll(async () => {
    dir = tempDir("agentwire-console-")
    core = await startCore(dir)
    token = readFileSync(join(dir, "operator-token"), "utf8").trim()
    const { file } = await createCredential(dir, "dev-web")
    daemon = startDaemon(core.url, "dev-web", file, join(dir, "profile"))
    await eventually(async () => ((await operator(core.url, token).get("/devices/dev-web")).body?.declaration ? true : undefined), 25_000, "dev-web declared")
    browser = await launchChromium()
    context = await browser.newContext({ viewport: { width: 1280, height: 800 } })
    page = await context.newPage()
    page.on("request", (request) => requested.push(request.url()))
  }, 90_000)

  afterAll(async () => {
    await browser?.close()
    await stopAll()
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true })
  }, 30_000)

  it("serves the page with a strict CSP and no data; the API refuses the browser without the token", async () => {
    const res = await fetch(core.url + "/")
    assert.strictEqual(res.status, 200)
    const csp = res.headers.get("content-security-policy") ?? ""
    assert.include(csp, "script-src 'self'")
    assert.include(csp, "frame-ancestors 'none'")
    assert.notInclude(csp, "unsafe-inline")
    assert.strictEqual(res.headers.get("x-content-type-options"), "nosniff")
    const html = await res.text()
    assert.notMatch(html, /<script>|\son[a-z]+=/i, "no inline script or handler attribute")
    assert.strictEqual((await fetch(core.url + "/console/app.js")).headers.get("content-type"), "text/javascript; charset=utf-8")
    assert.strictEqual((await fetch(core.url + "/", { method: "POST" })).status, 405)
    assert.strictEqual((await fetch(core.url + "/api/v1/operator/devices")).status, 401)
  })

  it("refuses a wrong token, then logs in and shows the device online with its declared kinds", async () => {
    await login("awop_not-the-token")
    await page.locator("#login-error").filter({ hasText: "refused" }).waitFor()
    assert.isTrue(await page.locator("#nav").isHidden())
    await login(token)
    const row = page.locator("#devices tr[data-device=dev-web]")
    await row.filter({ hasText: "online" }).waitFor()
    const text = await row.textContent()
    assert.include(text, "scripted")
    assert.include(text, "available")
    assert.include(text, "streaming")
    assert.match(text!, /connection #\d+/)
    // The scripted harness declares no workspace capability: no Files link, and the placeholder says why.
    assert.strictEqual(await row.locator("a", { hasText: "Files" }).count(), 0)
    await page.goto(core.url + "/#/devices/dev-web/files")
    await page.locator("#files-placeholder").filter({ hasText: "no workspace capability" }).waitFor()
    assert.strictEqual(await page.evaluate("window.sessionStorage.getItem(\"agentwire.operator_token\")"), token)
  }, 60_000)

  it("creates a Session, starts a Turn, shows its timeline live and steers it with the button", async () => {
    await page.goto(core.url + "/#/sessions")
    await page.locator("#create-session button").click()
    const start = page.locator("form.start-turn").first()
    await start.waitFor()
    await start.locator("input").fill(JSON.stringify({ script: [{ delta: "hello " }, { await_steer: 1 }, { delta: "world" }] }))
    await start.locator("button").click()
    await page.waitForURL(/#\/turns\/[^/]+$/)
    // Live: the first delta arrives while the Turn waits for the steer.
    await page.locator("#timeline li[data-kind=delta]").filter({ hasText: "hello" }).waitFor()
    await page.locator("#turn-head dd[data-field=status]").filter({ hasText: "running" }).waitFor()
    assert.notInclude((await timeline()).join("\n"), "world")
    await page.locator("#steer-form input").fill("go on")
    await page.locator("#steer").click()
    await page.locator("#action-result").filter({ hasText: "steer accepted position 1" }).waitFor()
    await page.locator("#timeline li[data-kind=delta]").filter({ hasText: "world" }).waitFor()
    await page.locator("#timeline li.outcome").filter({ hasText: "completed" }).waitFor()
    const rows = await timeline()
    assert.isTrue(rows.some((r) => r.includes("input_accepted")), rows.join("\n"))
    assert.isTrue(await page.locator("#steer").isDisabled())
  }, 60_000)

  it("an earlier refresh answered after the outcome never shows the Turn running again nor re-enables Steer", async () => {
    // Each input/interaction/outcome event makes the page GET the Turn; those answers travel on separate
    // connections and can arrive out of order. Hold the first GET after the steer and answer it last, with a
    // snapshot read while the Turn ran: the page must keep the outcome.
    const turnId = await startTurn([{ delta: "a " }, { await_steer: 1 }, { delta: "b" }])
    await page.goto(`${core.url}/#/turns/${turnId}`)
    await page.locator("#turn-head dd[data-field=status]").filter({ hasText: "running" }).waitFor()
    const runningSnapshot = (await operator(core.url, token).get(`/turns/${turnId}`)).body
    assert.strictEqual(runningSnapshot.status, "running")
    const turnPath = `/api/v1/operator/turns/${turnId}`
    let held: Route | undefined
    const passed: Array<Promise<unknown>> = []
    const isTurn = (url: URL) => url.pathname === turnPath
    await page.route(isTurn, async (route) => {
      if (route.request().method() !== "GET") return route.continue()
      if (held === undefined) {
        held = route
        return
      }
      passed.push(route.request().response().then((r) => r?.finished()))
      return route.continue()
    })
    try {
      await page.locator("#steer-form input").fill("go on")
      await page.locator("#steer").click()
      await page.locator("#timeline li.outcome").filter({ hasText: "completed" }).waitFor()
      // One GET per input, interaction and outcome row (issued as the row is added): wait for all of them.
      const issued = await page.locator("#timeline li.input, #timeline li.interaction, #timeline li.outcome").count()
      await eventually(async () => (held !== undefined && passed.length + 1 >= issued ? true : undefined), 10_000, "refreshes issued")
      await Promise.all(passed)
      await page.locator("#turn-head dd[data-field=status]").filter({ hasText: "completed" }).waitFor()
      const late = held!.request()
      await held!.fulfill({ status: 200, contentType: "application/json", body: JSON.stringify(runningSnapshot) })
      await (await late.response())?.finished()
      await page.evaluate(() => new Promise((resolve) => setTimeout(resolve, 50)))
      assert.strictEqual(await page.locator("#turn-head dd[data-field=status]").textContent(), "completed")
      assert.isTrue(await page.locator("#steer").isDisabled())
      assert.isTrue(await page.locator("#cancel").isDisabled())
    } finally {
      await page.unroute(isTurn)
    }
  }, 60_000)

  it("cancels a running Turn with the Cancel button", async () => {
    const turnId = await startTurn([{ await_steer: 1 }])
    await page.goto(`${core.url}/#/turns/${turnId}`)
    await page.locator("#turn-head dd[data-field=status]").filter({ hasText: "running" }).waitFor()
    await page.locator("#cancel").click()
    await page.locator("#action-result").filter({ hasText: "cancel cancelled" }).waitFor()
    await page.locator("#timeline li.outcome").filter({ hasText: "cancelled" }).waitFor()
  }, 60_000)

  it("answers a permission request with the Approve button", async () => {
    const turnId = await startTurn([{ permission: { tool: "shell", title: "run ls" } }, { delta: "permitted" }])
    await page.goto(`${core.url}/#/turns/${turnId}`)
    const approve = page.locator("#interactions button.approve")
    await approve.waitFor()
    assert.include(await page.locator("#interactions").textContent(), "run ls")
    await approve.click()
    await page.locator("#action-result").filter({ hasText: "answer applied" }).waitFor()
    await page.locator("#timeline li[data-kind=delta]").filter({ hasText: "permitted" }).waitFor()
    await page.locator("#timeline li.outcome").filter({ hasText: "completed" }).waitFor()
  }, 60_000)

  it("renders peer text as text: an HTML payload never becomes an element", async () => {
    const payload = "<img src=x id=injected onerror=\"document.title='pwned'\"><b>bold</b>"
    const turnId = await startTurn([{ delta: payload }])
    await page.goto(`${core.url}/#/turns/${turnId}`)
    await page.locator("#timeline li.outcome").waitFor()
    assert.include((await timeline()).join("\n"), "<img src=x id=injected")
    assert.strictEqual(await page.locator("#injected").count(), 0)
    assert.strictEqual(await page.locator("#timeline b").count(), 0)
    assert.notStrictEqual(await page.title(), "pwned")
  }, 60_000)

  it("lists Turns and takes non-blank screenshots of the main pages", async () => {
    // AGENTWIRE_CONSOLE_SHOTS=DIR keeps the screenshots for a human to look at (outside the repository).
    const keep = process.env.AGENTWIRE_CONSOLE_SHOTS
    const shots = keep ?? tempDir("agentwire-console-shots-")
    try {
      const pages: Array<[string, string]> = [
        ["devices", "#devices tr[data-device=dev-web]"],
        ["sessions", "#sessions tbody tr"],
        ["turns", "#turns tbody tr"]
      ]
      for (const [name, ready] of pages) {
        await page.goto(`${core.url}/#/${name}`)
        await page.locator(ready).first().waitFor()
        const png = await page.screenshot({ fullPage: false })
        writeFileSync(join(shots, `${name}.png`), png)
        const info = readPng(png)
        assert.strictEqual(info.width, 1280, name)
        assert.strictEqual(info.height, 800, name)
        assert.isAbove(info.distinctBytes, 32, `${name} is not a blank page`)
        assert.isAbove(info.nonBackground, 0.005, `${name} is not a blank page`)
      }
      const blank = await context.newPage()
      await blank.setContent("<html><body></body></html>")
      const empty = readPng(await blank.screenshot())
      await blank.close()
      assert.isBelow(empty.distinctBytes, 8, "the check above would tell a blank page")
      assert.isBelow(empty.nonBackground, 0.005)
      const turnHref = await (async () => {
        await page.goto(`${core.url}/#/turns`)
        return page.locator("#turns tbody a").first().getAttribute("href")
      })()
      await page.goto(`${core.url}/${turnHref}`)
      await page.locator("#timeline li.outcome").waitFor()
      const turnPng = await page.screenshot({ fullPage: true })
      writeFileSync(join(shots, "turn.png"), turnPng)
      const turnShot = readPng(turnPng)
      assert.strictEqual(turnShot.width, 1280)
      assert.isAbove(turnShot.distinctBytes, 32)
    } finally {
      if (keep === undefined) rmSync(shots, { recursive: true, force: true })
    }
  }, 60_000)

  it("never puts the token in a URL the browser requested nor in a log line of either side", async () => {
    assert.isAbove(requested.length, 10)
    for (const url of requested) assert.notInclude(url, token)
    assert.notInclude(core.stdout + core.stderr, token)
    assert.notInclude(daemon.stdout + daemon.stderr, token)
    await page.locator("#logout").click()
    await page.locator("#login").waitFor()
    assert.isNull(await page.evaluate("window.sessionStorage.getItem(\"agentwire.operator_token\")"))
  })
})
