// Tokenizer parity for one tokenizer directory: seeded test strings are encoded by the Hugging
// Face library's own Node binding (npm `tokenizers`, the reference) and by `brigade tokenize
// --jsonl` in one process; brigade's ids must equal the reference's, with and without
// add_special_tokens, and `brigade detokenize --jsonl` of brigade's ids must give the text the
// reference decodes from its ids. @lenml/tokenizers, a second JavaScript peer, is compared with
// the reference too, for information only: where the two disagree, the Hugging Face library
// is right.
//
// usage: node parity.js BRIGADE TOKENIZER_DIR LABEL SEED COUNT WORK_DIR
// Writes WORK_DIR/LABEL-cases.json ({seed, cases: [{text, ids, decoded}]}) for the streaming
// check of parity_tool. Exits 1 on any mismatch, printing the first ones with the seed.
"use strict";
const fs = require("fs");
const path = require("path");
const { spawnSync } = require("child_process");
// The prebuilt linux-x64 binary of npm `tokenizers` (see README.md for why not the wrapper).
const { Tokenizer } = require("tokenizers-linux-x64-gnu");
const { TokenizerLoader } = require("@lenml/tokenizers");
const { makeRandom, makeString } = require("./strings.js");

const MAX_REPORTED = 8;

// The binding wraps version 0.13 of the Rust library, which reads merges only in the older
// "left right" form and does not know ignore_merges. Newer files (Qwen3's) are rewritten to that
// form, which changes nothing for byte-level tokens (they hold no spaces) and ignore_merges false.
function referenceJson(tokenizerJson) {
  const j = JSON.parse(JSON.stringify(tokenizerJson));
  const model = j.model;
  if (model.ignore_merges) throw new Error("ignore_merges: true cannot be checked against 0.13");
  delete model.ignore_merges;
  model.merges = model.merges.map((m) => {
    if (typeof m === "string") return m;
    if (m[0].includes(" ") || m[1].includes(" ")) throw new Error(`merge ${m} holds a space`);
    return `${m[0]} ${m[1]}`;
  });
  return JSON.stringify(j);
}

function runBrigade(brigade, args, input) {
  const r = spawnSync(brigade, args, { encoding: "utf8", maxBuffer: 1 << 30 });
  if (r.status !== 0) {
    throw new Error(`brigade ${args.join(" ")} failed (${r.status}) on ${input}:\n${r.stderr}`);
  }
  const lines = r.stdout.split("\n");
  if (lines[lines.length - 1] === "") lines.pop();
  return lines.map((l) => JSON.parse(l));
}

function writeJsonl(file, values) {
  fs.writeFileSync(file, values.map((v) => JSON.stringify(v)).join("\n") + "\n");
}

function firstDifference(a, b) {
  let i = 0;
  while (i < a.length && i < b.length && a[i] === b[i]) ++i;
  return i;
}

function sameIds(a, b) {
  return a.length === b.length && firstDifference(a, b) === a.length;
}

class Report {
  constructor(label, seed) {
    this.label = label;
    this.seed = seed;
    this.counts = {};
    this.printed = 0;
  }
  mismatch(kind, index, text, details) {
    this.counts[kind] = (this.counts[kind] || 0) + 1;
    if (this.printed++ >= MAX_REPORTED) return;
    console.log(`MISMATCH (${kind}) ${this.label} case ${index} of seed ${this.seed}: ` +
      `text ${JSON.stringify(text)}`);
    for (const line of details) console.log(`  ${line}`);
  }
  idMismatch(kind, index, text, expected, got) {
    const at = firstDifference(expected, got);
    this.mismatch(kind, index, text, [
      `first difference at position ${at}`,
      `reference: ${JSON.stringify(expected)}`,
      `brigade:   ${JSON.stringify(got)}`]);
  }
  count(kind) {
    return this.counts[kind] || 0;
  }
}

async function reference(dir, texts) {
  const json = JSON.parse(fs.readFileSync(path.join(dir, "tokenizer.json"), "utf8"));
  const tok = Tokenizer.fromString(referenceJson(json));
  const plain = await tok.encodeBatch(texts, { addSpecialTokens: false });
  const special = await tok.encodeBatch(texts, { addSpecialTokens: true });
  const ids = plain.map((e) => e.getIds());
  const decoded = await tok.decodeBatch(ids, false);
  return { ids, specialIds: special.map((e) => e.getIds()), decoded };
}

// The second peer's ids, or null where it cannot load the tokenizer.
function lenml(dir, texts) {
  const read = (name) => JSON.parse(fs.readFileSync(path.join(dir, name), "utf8"));
  try {
    const tok = TokenizerLoader.fromPreTrained({
      tokenizerJSON: read("tokenizer.json"),
      tokenizerConfig: read("tokenizer_config.json"),
    });
    return texts.map((t) => tok.encode(t, { add_special_tokens: false }));
  } catch (e) {
    console.log(`${dir}: @lenml/tokenizers cannot load it (${e.message})`);
    return null;
  }
}

async function main() {
  const [brigade, dir, label, seedText, countText, work] = process.argv.slice(2);
  if (!work) {
    console.error("usage: node parity.js BRIGADE TOKENIZER_DIR LABEL SEED COUNT WORK_DIR");
    process.exit(2);
  }
  const seed = Number(seedText);
  const random = makeRandom(seed);
  const texts = [];
  for (let i = 0; i < Number(countText); ++i) texts.push(makeString(random, i));
  const ref = await reference(dir, texts);

  const textsFile = path.join(work, `${label}-texts.jsonl`);
  writeJsonl(textsFile, texts);
  const base = ["--model", dir, "--jsonl", textsFile, "--json"];
  const plain = runBrigade(brigade, ["tokenize", ...base], textsFile);
  const special = runBrigade(brigade, ["tokenize", ...base, "--add-special-tokens"], textsFile);
  const idsFile = path.join(work, `${label}-ids.jsonl`);
  writeJsonl(idsFile, plain.map((p) => p.ids));
  const decoded = runBrigade(brigade, ["detokenize", "--model", dir, "--jsonl", idsFile], idsFile);

  const report = new Report(label, seed);
  let templateAdds = 0;
  for (let i = 0; i < texts.length; ++i) {
    if (!sameIds(ref.ids[i], plain[i].ids)) {
      report.idMismatch("ids", i, texts[i], ref.ids[i], plain[i].ids);
    }
    if (!sameIds(ref.specialIds[i], special[i].ids)) {
      report.idMismatch("ids with add_special_tokens", i, texts[i], ref.specialIds[i],
        special[i].ids);
    }
    templateAdds += ref.specialIds[i].length - ref.ids[i].length;
    if (decoded[i] !== ref.decoded[i]) {
      report.mismatch("decode", i, texts[i], [`reference: ${JSON.stringify(ref.decoded[i])}`,
        `brigade:   ${JSON.stringify(decoded[i])}`]);
    }
  }
  const second = lenml(dir, texts);
  const lenmlDiffers = second ? second.filter((ids, i) => !sameIds(ids, ref.ids[i])).length : "-";

  fs.writeFileSync(path.join(work, `${label}-cases.json`), JSON.stringify({
    seed, tokenizer: dir,
    cases: texts.map((text, i) => ({ text, ids: ref.ids[i], decoded: ref.decoded[i] })),
  }));
  const failures = report.count("ids") + report.count("ids with add_special_tokens") +
    report.count("decode");
  console.log(`${label}: ${texts.length} strings (seed ${seed}): ` +
    `${report.count("ids")} id mismatches, ` +
    `${report.count("ids with add_special_tokens")} with add_special_tokens ` +
    `(where the template adds ${templateAdds / texts.length} ids per string), ` +
    `${report.count("decode")} decode mismatches; ` +
    `@lenml/tokenizers differs from the reference on ${lenmlDiffers}`);
  process.exit(failures === 0 && texts.length > 0 ? 0 : 1);
}

main().catch((e) => {
  console.error(e.stack || String(e));
  process.exit(1);
});
