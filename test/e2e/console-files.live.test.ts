/**
 * The console's Files view end to end in headless Chromium: a real `agentwire core`, a real daemon bound to a
 * temporary workspace (`--environment-id`, `--workspace`) and a Session with that `self_hosted` Environment.
 * The page lists the workspace root, opens a directory, shows a file's text, and peer-controlled names stay
 * text (an HTML file name never becomes an element).
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { mkdirSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import type { Browser, Page } from "playwright-core"
import { launchChromium, skipChromium } from "../support/chromium.js"
import { type BoundDevCore, startBoundDevCore } from "../support/boundDevCore.js"
import type { CoreProc } from "../support/devcoreLive.js"

const skip = skipChromium()
const EnvironmentId = "7b2e1d0c-4a5f-4b6e-9c8d-1e2f3a4b5c6d"

let stack: BoundDevCore
let core: CoreProc
let token: string
let browser: Browser
let page: Page

describe.skipIf(skip)("console Files view in headless Chromium (end to end)", () => {
  beforeAll(async () => {
    stack = await startBoundDevCore({
      name: "console-files",
      deviceId: "dev-files",
      environmentId: EnvironmentId,
      seed: (root) => {
        mkdirSync(join(root, "docs"))
        writeFileSync(join(root, "docs", "guide.md"), "# Guide\nread me\n")
        writeFileSync(join(root, "<img src=x onerror=alert(1)>.txt"), "x")
      }
    })
    ;({ core, token } = stack)
    const api = stack.api
    const created = await api.post("/sessions", {
      agent_kind: "scripted",
      device_id: "dev-files",
      environment: stack.binding()
    })
    assert.strictEqual(created.status, 201)
    browser = await launchChromium()
    page = await (await browser.newContext({ viewport: { width: 1280, height: 800 } })).newPage()
    await page.goto(core.url + "/")
    await page.locator("#token").fill(token)
    await page.locator("#login-form button[type=submit]").click()
  }, 90_000)

  afterAll(async () => {
    await browser?.close()
    await stack?.close()
  }, 30_000)

  it("lists the workspace, opens a directory and shows a file's text; names stay text", async () => {
    await page.goto(core.url + "/#/devices/dev-files/files")
    // Routes in quick succession (as a login, a hash change and a reload can cause): the late answer of the
    // first render must not add a second Files view.
    await page.evaluate(() => {
      const location = (globalThis as unknown as { location: { hash: string } }).location
      location.hash = "#/sessions"
      setTimeout(() => (location.hash = "#/devices/dev-files/files"), 0)
    })
    const listing = page.locator("#files-listing")
    await listing.locator("a", { hasText: "docs/" }).waitFor()
    await page.waitForTimeout(500)
    assert.strictEqual(await page.locator("#files-listing").count(), 1, "one Files view")
    assert.strictEqual(await page.locator("#files-listing img").count(), 0)
    await listing.locator("a", { hasText: "<img src=x onerror=alert(1)>.txt" }).waitFor()
    await listing.locator("a", { hasText: "docs/" }).click()
    await listing.locator("a", { hasText: "guide.md" }).click()
    await page.locator("#files-content").filter({ hasText: "read me" }).waitFor()
    assert.strictEqual(await page.locator("#files-content").textContent(), "# Guide\nread me\n")
    assert.match((await page.locator("#files-status").textContent()) ?? "", /docs\/guide\.md: 16 bytes/)
  })
})
