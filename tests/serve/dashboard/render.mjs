// Runs the dashboard's own script (extracted from GET /dashboard) in node against a live
// `brigade serve`, with a small stand-in for the browser's DOM, and prints what it rendered as
// JSON: the test then compares it with the server's JSON.
//
// Usage: node render.mjs SCRIPT.js BASE_URL [API_KEY]
import { readFileSync } from "node:fs";

const [scriptPath, base, key] = process.argv.slice(2);

class Node {}
class Text extends Node {
  constructor(text) {
    super();
    this.text = String(text);
  }
  get textContent() {
    return this.text;
  }
}
class Element extends Node {
  constructor(tag) {
    super();
    this.tag = tag;
    this.attrs = {};
    this.children = [];
    this.listeners = {};
    this.value = "";
  }
  setAttribute(k, v) {
    this.attrs[k] = String(v);
  }
  wrap(items) {
    return items.map((c) => (c instanceof Node ? c : new Text(c)));
  }
  append(...items) {
    this.children.push(...this.wrap(items));
  }
  prepend(...items) {
    this.children.unshift(...this.wrap(items));
  }
  replaceChildren(...items) {
    this.children = this.wrap(items);
  }
  addEventListener(type, fn) {
    (this.listeners[type] ||= []).push(fn);
  }
  get options() {
    return this.children.filter((c) => c.tag === "option");
  }
  set textContent(text) {
    this.children = [new Text(text)];
  }
  get textContent() {
    return this.children.map((c) => c.textContent).join("");
  }
  find(tag) {
    const out = [];
    for (const c of this.children) {
      if (!(c instanceof Element)) continue;
      if (c.tag === tag) out.push(c);
      out.push(...c.find(tag));
    }
    return out;
  }
}

const byId = {};
globalThis.Node = Node;
globalThis.document = {
  getElementById: (id) => (byId[id] ||= new Element("div")),
  createElement: (tag) => new Element(tag),
  createElementNS: (ns, tag) => new Element(tag),
  createTextNode: (text) => new Text(text),
};
globalThis.sessionStorage = { getItem: () => key || null, setItem: () => {} };
const realFetch = globalThis.fetch;
globalThis.fetch = (path, options) => realFetch(base + path, options);
globalThis.setInterval = () => 0;  // one refresh is enough here

new Function(readFileSync(scriptPath, "utf8"))();

const $ = (id) => document.getElementById(id);
const deadline = Date.now() + 20000;
while (!$("updated").textContent && !$("error").textContent && Date.now() < deadline) {
  await new Promise((r) => setTimeout(r, 50));
}
const rows = (id) => ($(id).find("table")[0] || new Element("table")).find("tr");
console.log(JSON.stringify({
  error: $("error").textContent,
  updated: $("updated").textContent,
  cards: Object.fromEntries($("cards").find("div").map((card) => [
    card.find("span")[0].textContent, card.find("b")[0].textContent])),
  roles: rows("roles").slice(1).map((tr) => tr.find("td").map((td) => td.textContent)),
  // The speculation panel's tables, cell text by row, headers left out.
  speculation: rows("speculation").slice(1).map((tr) => tr.find("td").map((td) => td.textContent)),
  spec_positions: rows("spec-positions").slice(1).map(
      (tr) => tr.find("td").map((td) => td.textContent)),
  calibration: rows("calibration").slice(1).map((tr) => tr.find("td").map((td) => td.textContent)),
  speculation_note: $("speculation").textContent,
  // An empty cell is null, not Number("") = 0, so that a blank expert 0 is caught.
  layout: rows("layout").map((tr) => tr.find("span").map(
      (s) => (s.textContent === "" ? null : Number(s.textContent)))),
  replicas: rows("layout").flatMap((tr) => tr.find("span"))
      .filter((s) => s.attrs.class === "slot replica").length,
  load_rows: rows("load").length,
  history_points: ($("history").find("polyline")[0]?.attrs.points || "").split(" ")
      .filter(Boolean).length,
}));
process.exit(0);
