// The dashboard in Debian's headless Chromium, driven by playwright-core, against a live
// `brigade serve` that browser_test.py started: it asks for the key on a 401, renders the layout
// of /v1/experts slot for slot (expert 0 and epoch 0 included), and follows a re-plan live (the
// event row, the new epoch, the new layout, a new balancedness point). Screenshots go to WORK.
//
// Usage (from the folder that holds node_modules/playwright-core):
//   BASE=http://127.0.0.1:PORT KEY=... WORK=DIR CHROMIUM=/usr/bin/chromium node browser_test.mjs
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { chromium } from "playwright-core";

const { BASE, KEY, WORK, CHROMIUM } = process.env;
const WAIT_MS = 30000;
// Chromium on a machine without a network: no sandbox (root), no GPU, no calls home.
const FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
               "--disable-background-networking", "--disable-component-update", "--disable-sync"];

let ok = true;
function check(name, passed, detail) {
  console.log(`${passed ? "ok  " : "FAIL"} ${name}${passed ? "" : ": " + detail}`);
  ok &&= passed;
}

async function api(path, body) {
  const r = await fetch(BASE + path, {
    method: body === undefined ? "GET" : "POST",
    headers: { Authorization: "Bearer " + KEY, "Content-Type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (!r.ok) throw new Error(`${path}: HTTP ${r.status}: ${await r.text()}`);
  return r.json();
}

// Greedy completions, one after another: every few steps closes a load sample window.
async function complete(count, first) {
  for (let i = 0; i < count; ++i) {
    await api("/v1/completions", { model: "model", prompt: [first + i, 41, 42], max_tokens: 24,
                                   temperature: 0, ignore_eos: true });
  }
}

// What the page shows, read off the real DOM.
function view(page) {
  return page.evaluate(() => {
    const $ = (id) => document.getElementById(id);
    const texts = (root, selector) =>
      [...root.querySelectorAll(selector)].map((e) => e.textContent);
    const points = $("history").querySelector("polyline")?.getAttribute("points") || "";
    return {
      error: $("error").textContent,
      updated: $("updated").textContent,
      keyAsked: $("key").classList.contains("ask"),
      cards: Object.fromEntries([...$("cards").querySelectorAll(".card")].map((c) => [
        c.querySelector("span").textContent,
        { value: c.querySelector("b").textContent, note: c.querySelector("small")?.textContent }])),
      layers: $("layer").options.length,
      layout: [...$("layout").querySelectorAll("tr")].map((tr) => texts(tr, ".slot")),
      roles: [...$("roles").querySelectorAll("tr")].slice(1).map((tr) => texts(tr, "td")),
      historyPoints: points.split(" ").filter(Boolean).length,
      historyNote: $("history-note")?.textContent,
      events: texts($("events"), "div"),
    };
  });
}

// The layout of layer 0 in /v1/experts as the page should show it: a row of slots per shard.
function expectedLayout(experts) {
  const phy2log = experts.layout[0].phy2log.map(String);
  const slots = experts.slots_per_shard;
  return Array.from({ length: experts.shards },
                    (_, s) => phy2log.slice(s * slots, (s + 1) * slots));
}

// Polls until `test(view, server)` holds (server: what fetchServer() gave at the same time);
// returns [passed, a description of the last look].
async function waitFor(page, fetchServer, test, describe) {
  const deadline = Date.now() + WAIT_MS;
  let v, server;
  for (;;) {
    server = fetchServer ? await fetchServer() : undefined;
    v = await view(page);
    if (test(v, server)) return [true, ""];
    if (Date.now() > deadline) return [false, describe(v, server)];
    await new Promise((r) => setTimeout(r, 200));
  }
}

const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);
const experts = () => api("/v1/experts");
const statusByName = async () =>
  Object.fromEntries((await api("/v1/status")).map((s) => [s.name, s]));

async function checkAsksForKey(page) {
  let [passed, detail] = await waitFor(page, null, (v) => v.error.includes("API key") && v.keyAsked,
                                       (v) => JSON.stringify(v.error));
  check("without a key the page asks for it (401)", passed, detail);
  const wrong = page.waitForResponse((r) => r.url().endsWith("/v1/experts") &&
      r.request().headers().authorization === "Bearer not-the-key", { timeout: WAIT_MS });
  await page.fill("#key", "not-the-key");
  await page.press("#key", "Enter");
  const status = (await wrong).status();
  [passed, detail] = await waitFor(page, null, (v) => v.error.includes("HTTP 401") &&
                                   v.error.includes("API key") && v.keyAsked && v.updated === "",
                                   (v) => JSON.stringify([v.error, v.updated]));
  check("with a wrong key (sent, answered 401) it asks again", status === 401 && passed,
        `HTTP ${status}, ${detail}`);
  await page.screenshot({ path: join(WORK, "locked.png") });
}

async function checkIdleRender(page) {
  await page.fill("#key", KEY);
  await page.press("#key", "Enter");
  let [passed, detail] = await waitFor(page, experts, (v, e) => v.error === "" &&
      v.updated !== "" && !v.keyAsked && same(v.layout, expectedLayout(e)) &&
      v.layers === e.layout.length,
      (v, e) => `${JSON.stringify(v.layout)} against ${JSON.stringify(expectedLayout(e))}, ` +
                `error ${JSON.stringify(v.error)}`);
  check("with the key: the layout equals /v1/experts slot for slot", passed, detail);
  const v = await view(page);
  check("expert 0 has its cell", v.layout.flat().filter((x) => x === "0").length > 0,
        JSON.stringify(v.layout));
  check("the layout epoch card says 0", v.cards["layout epoch"]?.value === "0",
        JSON.stringify(v.cards["layout epoch"]));
  const balance = v.cards["expert balancedness"];
  check("before any sample window the balancedness says none yet",
        balance?.value === "\u2014" && balance.note === "no sample window yet" &&
        v.historyNote === "no sample window yet" && v.historyPoints === 0,
        JSON.stringify([balance, v.historyNote, v.historyPoints]));
  [passed, detail] = await waitFor(page, statusByName, (w, s) => w.roles.length > 0 &&
      w.roles.length === Object.keys(s).length && w.roles.every((r) => s[r[0]] &&
          r[2] === String(s[r[0]].queue_depth) && r[3] === String(s[r[0]].in_flight)),
      (w, s) => `${JSON.stringify(w.roles)} against ${JSON.stringify(Object.values(s).map(
          (r) => [r.name, r.queue_depth, r.in_flight]))}`);
  check("queue and in-flight cells show the values, 0 included", passed, detail);
}

// Sends completions until /v1/experts shows a window it had not closed before (a window closes
// once every shard reported it, so that takes a few requests), then waits for the page to plot
// it; `what` names the check.
async function checkNewWindow(page, what, firstPrompt) {
  const before = await experts();
  const newest = (e) => (e.windows.length ? e.windows[e.windows.length - 1].window : -1);
  for (let i = 0; i < 16 && newest(await experts()) <= newest(before); ++i) {
    await complete(1, firstPrompt + i);
  }
  const [passed, detail] = await waitFor(page, experts, (v, e) => newest(e) > newest(before) &&
      v.historyPoints === e.windows.length &&
      v.cards["expert balancedness"]?.value === e.balancedness.toFixed(3),
      (v, e) => `${v.historyPoints} points, card ` +
                `${JSON.stringify(v.cards["expert balancedness"])}; server ` +
                `${e.windows.length} windows, balancedness ${e.balancedness}`);
  check(what, passed, detail);
}

async function checkReplan(page) {
  const before = await experts();
  const answer = await api("/v1/admin/replan", { seed: 5 });
  check("POST /v1/admin/replan {seed: 5} started", answer.replan === "started",
        JSON.stringify(answer));
  const epoch = before.epoch + 1;
  const finished = new RegExp(`migration_finished\\s+epoch ${epoch}\\b`);
  const [passed, detail] = await waitFor(page, experts, (v, e) => e.migration === null &&
      e.epoch === epoch && v.events.some((row) => finished.test(row)),
      (v, e) => `epoch ${e.epoch}, migration ${JSON.stringify(e.migration)}, ` +
                `events ${JSON.stringify(v.events.slice(0, 4))}`);
  check(`the page shows the migration_finished row of epoch ${epoch}`, passed, detail);
  const v = await view(page);
  check("and the migration_started row with the slots moved",
        v.events.some((row) => new RegExp(`migration_started\\s+epoch ${epoch}\\s+moved \\d+`)
            .test(row)), JSON.stringify(v.events.slice(0, 4)));
  let [shown, why] = await waitFor(page, experts, (w, e) => w.cards["layout epoch"]?.value ===
      String(epoch) && w.cards.migration?.value === "none" && same(w.layout, expectedLayout(e)),
      (w, e) => `epoch card ${JSON.stringify(w.cards["layout epoch"])}, layout ` +
                `${JSON.stringify(w.layout)} against ${JSON.stringify(expectedLayout(e))}`);
  check(`the epoch card says ${epoch} and the layout equals /v1/experts again`, shown, why);
  check("the new layout differs from the old one",
        !same((await view(page)).layout, expectedLayout(before)), "the same layout");
  await checkNewWindow(page, "a window closed under the new layout adds a balancedness point", 60);
  [shown, why] = await waitFor(page, null, (w) => w.events.some((row) =>
      new RegExp(`balance_measured\\s+epoch ${epoch}\\s+measured`).test(row)),
      (w) => JSON.stringify(w.events.slice(0, 4)));
  check(`the balance_measured row of epoch ${epoch}`, shown, why);
}

async function main() {
  const started = Date.now();
  mkdirSync(WORK, { recursive: true });
  const context = await chromium.launchPersistentContext(join(WORK, "profile"), {
    executablePath: CHROMIUM, headless: true, args: FLAGS, viewport: { width: 1280, height: 800 },
  });
  const errors = [];
  try {
    const page = context.pages()[0] || await context.newPage();
    page.on("pageerror", (e) => errors.push(e.message));
    await page.goto(BASE + "/dashboard");
    await checkAsksForKey(page);
    await checkIdleRender(page);
    await page.screenshot({ path: join(WORK, "idle.png") });
    await checkNewWindow(page, "sample windows: the balancedness card and a point per window", 40);
    await page.screenshot({ path: join(WORK, "before-replan.png") });
    await checkReplan(page);
    await page.screenshot({ path: join(WORK, "after-replan.png") });
    check("no script error in the page", errors.length === 0, JSON.stringify(errors));
  } finally {
    await context.close();
  }
  console.log(`${ok ? "PASS" : "FAIL"} in ${((Date.now() - started) / 1000).toFixed(1)} s; ` +
              `screenshots in ${WORK}`);
  process.exit(ok ? 0 : 1);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
