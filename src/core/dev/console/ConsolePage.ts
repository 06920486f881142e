/**
 * The console's page and style sheet (ConsoleRoutes.ts serves them). The page is a static shell: a login form
 * and empty containers the script fills. No inline script, no inline style, no event handler attributes.
 */

export const ConsoleHtml = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>agentwire console</title>
<link rel="stylesheet" href="/console/app.css">
<script src="/console/app.js" defer></script>
</head>
<body>
<header>
  <h1>agentwire</h1>
  <nav id="nav" hidden>
    <a href="#/devices" data-view="devices">Devices</a>
    <a href="#/sessions" data-view="sessions">Sessions</a>
    <a href="#/turns" data-view="turns">Turns</a>
    <button type="button" id="logout">Log out</button>
  </nav>
</header>
<main>
  <section id="login" hidden>
    <h2>Operator login</h2>
    <p>Paste the operator token (<code>&lt;data dir&gt;/operator-token</code>). It is kept in this tab only.</p>
    <form id="login-form" autocomplete="off">
      <label for="token">Operator token</label>
      <input id="token" name="token" type="password" required spellcheck="false">
      <button type="submit">Log in</button>
    </form>
    <p id="login-error" class="error" role="alert"></p>
  </section>
  <section id="view" hidden></section>
</main>
<footer><span id="status" role="status"></span></footer>
</body>
</html>
`

export const ConsoleStyle = `
:root { --fg: #1d2125; --muted: #5f6b76; --line: #d8dee4; --bg: #f6f8fa; --accent: #0b5cad;
  --ok: #1a7f37; --bad: #b42318; --warn: #9a6700; font-family: system-ui, sans-serif; color: var(--fg); }
[hidden] { display: none !important; }
body { margin: 0; background: #fff; }
header { display: flex; align-items: center; gap: 2rem; padding: .6rem 1.2rem; background: #1d2125; color: #fff; }
header h1 { font-size: 1.1rem; margin: 0; letter-spacing: .05em; }
nav { display: flex; gap: 1rem; align-items: center; }
nav a { color: #cfd8e3; text-decoration: none; padding: .2rem .4rem; border-radius: 3px; }
nav a.active { background: #3a434c; color: #fff; }
nav button { margin-left: 1rem; }
main { padding: 1rem 1.2rem; max-width: 1200px; }
footer { padding: .4rem 1.2rem; color: var(--muted); font-size: .85rem; }
h2 { font-size: 1.2rem; margin: .4rem 0 .8rem; }
h3 { font-size: 1rem; margin: 1rem 0 .4rem; }
table { border-collapse: collapse; width: 100%; margin-bottom: 1rem; }
th, td { text-align: left; padding: .35rem .5rem; border-bottom: 1px solid var(--line); vertical-align: top; font-size: .9rem; }
th { background: var(--bg); font-weight: 600; }
code, .mono { font-family: ui-monospace, monospace; font-size: .85rem; }
.badge { display: inline-block; padding: 0 .45rem; border-radius: 9px; font-size: .8rem; border: 1px solid var(--line); }
.badge.ok, .badge.available, .badge.online, .badge.completed, .badge.accepted, .badge.applied, .badge.cancelled { color: var(--ok); border-color: var(--ok); }
.badge.bad, .badge.unavailable, .badge.offline, .badge.failed, .badge.rejected, .badge.revoked { color: var(--bad); border-color: var(--bad); }
.badge.running, .badge.queued, .badge.pending, .badge.unknown, .badge.unconfirmed { color: var(--warn); border-color: var(--warn); }
.caps { color: var(--muted); font-size: .8rem; }
.error { color: var(--bad); }
form.inline { display: flex; gap: .5rem; align-items: center; flex-wrap: wrap; margin: .5rem 0; }
input[type=text], input[type=password], select, textarea { padding: .3rem .4rem; border: 1px solid var(--line); border-radius: 3px; font: inherit; }
input[type=text] { min-width: 18rem; }
button { padding: .3rem .8rem; border: 1px solid var(--accent); background: var(--accent); color: #fff; border-radius: 3px; cursor: pointer; font: inherit; }
button.secondary { background: #fff; color: var(--accent); }
button.danger { background: var(--bad); border-color: var(--bad); }
button:disabled { opacity: .5; cursor: default; }
#login form { display: flex; gap: .5rem; align-items: center; }
#login input { min-width: 24rem; }
.turn-head { display: grid; grid-template-columns: max-content 1fr; gap: .2rem 1rem; margin-bottom: .8rem; }
.turn-head dt { color: var(--muted); }
.turn-head dd { margin: 0; }
.controls { display: flex; flex-direction: column; gap: .3rem; margin: .6rem 0 1rem; padding: .6rem; background: var(--bg); border: 1px solid var(--line); }
#timeline { list-style: none; padding: 0; margin: 0; border-top: 1px solid var(--line); }
#timeline li { display: grid; grid-template-columns: 3.5rem 6rem 12rem 1fr; gap: .5rem; padding: .25rem .3rem; border-bottom: 1px solid var(--line); font-size: .85rem; }
#timeline li .seq { color: var(--muted); text-align: right; }
#timeline li.frame .kind { color: var(--accent); }
#timeline li.fact .kind { color: var(--muted); }
#timeline li.outcome { font-weight: 600; }
#timeline li .text { white-space: pre-wrap; word-break: break-word; }
.muted { color: var(--muted); }
.placeholder { padding: 1rem; border: 1px dashed var(--line); color: var(--muted); }
`
