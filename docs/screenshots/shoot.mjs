// Screenshots of an HTML report in headless Chromium through the DevTools protocol, with the pointer over the
// picked finding's later operation (or over a host row's bar when nothing is picked), so that the picture shows
// a tooltip too. Node 22+, or Node 20 with --experimental-websocket; no packages.
//
//   node shoot.mjs CHROMIUM URL OUT.png WIDTH HEIGHT
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync, existsSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const [chromium, url, out, width, height] = process.argv.slice(2);
const profile = mkdtempSync(join(tmpdir(), "streamtrace-shot-"));
const browser = spawn(chromium, [
  "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
  "--disable-component-update", "--disable-sync", "--hide-scrollbars", `--user-data-dir=${profile}`,
  "--remote-debugging-port=0", `--window-size=${width},${height}`, "about:blank",
], { stdio: "ignore" });
const sleep = ms => new Promise(r => setTimeout(r, ms));
async function main() {
  // Chromium writes the port it took into the profile.
  const portFile = join(profile, "DevToolsActivePort");
  for (let i = 0; i < 1200 && !existsSync(portFile); i++) await sleep(50);
  const port = readFileSync(portFile, "utf8").split("\n")[0];
  const targets = await (await fetch(`http://127.0.0.1:${port}/json/list`)).json();
  const ws = new WebSocket(targets.find(t => t.type === "page").webSocketDebuggerUrl);
  await new Promise((resolve, reject) => { ws.onopen = resolve; ws.onerror = reject; });
  let next = 0;
  const waiting = new Map();
  ws.onmessage = m => { const msg = JSON.parse(m.data); if (waiting.has(msg.id)) { waiting.get(msg.id)(msg); waiting.delete(msg.id); } };
  const call = (method, params = {}) => new Promise(resolve => { const id = ++next; waiting.set(id, resolve); ws.send(JSON.stringify({ id, method, params })); });
  const evaluate = async expression => (await call("Runtime.evaluate", { expression, returnByValue: true })).result?.result?.value;
  await call("Emulation.setDeviceMetricsOverride", { width: +width, height: +height, deviceScaleFactor: 1, mobile: false });
  await call("Page.enable");
  await call("Page.navigate", { url });
  for (let i = 0; i < 200 && (await evaluate("document.body && document.body.dataset.ready")) !== "1"; i++) await sleep(50);
  const errors = await evaluate("window.__errors || []");
  // Where to point: the picked finding's later (else earlier) bar, else the middle of the first host row's bars.
  const point = await evaluate(`(() => {
    const c = canvas.getBoundingClientRect(), w = canvas.clientWidth;
    const i = selected ? (selected.later ?? selected.earlier) : null;
    if (i !== null && i !== undefined) { const r = barRect(i, w); return [c.left + (r.a + Math.min(r.b, r.a + 40)) / 2, c.top + r.y + laneH[data.ops[i][0]] / 2]; }
    if (data.spans.length) { const y = laneY[data.spans[0][0]]; return [c.left + LABEL_W + (w - LABEL_W) * 0.55, c.top + y + laneH[data.spans[0][0]] / 2]; }
    return null;
  })()`);
  if (point) {
    await call("Input.dispatchMouseEvent", { type: "mouseMoved", x: point[0], y: point[1] });
    await sleep(200);
  }
  const shot = await call("Page.captureScreenshot", { format: "png" });
  writeFileSync(out, Buffer.from(shot.result.data, "base64"));
  if (errors.length) { console.error(errors.join("\n")); process.exitCode = 1; }
  ws.close();
}
main().catch(e => { console.error(e); process.exitCode = 1; }).finally(() => { browser.kill(); setTimeout(() => rmSync(profile, { recursive: true, force: true }), 300); });
