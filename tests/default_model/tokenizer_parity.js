// The default model's tokenizer against the Hugging Face tokenizers library (its Node binding,
// npm `tokenizers-linux-x64-gnu`, as tests/model/tokenizer_parity pins it): every non-empty line
// of the held-out sample must get the same ids from `brigade tokenize` as from the library, and
// `brigade detokenize` must give the library's decoded text back.
//
// usage: NODE_PATH=.../node_modules node tokenizer_parity.js BRIGADE MODEL_DIR TEXT_FILE WORK_DIR
"use strict";
const fs = require("fs");
const path = require("path");
const { spawnSync } = require("child_process");
const { Tokenizer } = require("tokenizers-linux-x64-gnu");

// Version 0.13 of the library does not know ignore_merges (false here, so dropping it changes
// nothing); the merges are already in its "left right" form.
function referenceJson(file) {
  const j = JSON.parse(fs.readFileSync(file, "utf8"));
  if (j.model.ignore_merges) throw new Error("ignore_merges: true cannot be checked against 0.13");
  delete j.model.ignore_merges;
  return JSON.stringify(j);
}

function brigadeLines(brigade, args) {
  const r = spawnSync(brigade, args, { encoding: "utf8", maxBuffer: 1 << 30 });
  if (r.status !== 0) throw new Error(`brigade ${args.join(" ")} failed: ${r.stderr}`);
  return r.stdout.split("\n").filter((l) => l !== "").map((l) => JSON.parse(l));
}

async function main() {
  const [brigade, modelDir, textFile, work] = process.argv.slice(2);
  if (!work) {
    console.error("usage: node tokenizer_parity.js BRIGADE MODEL_DIR TEXT_FILE WORK_DIR");
    process.exit(2);
  }
  fs.mkdirSync(work, { recursive: true });
  const lines = fs.readFileSync(textFile, "utf8").split("\n").filter((l) => l.trim() !== "");
  const tok = Tokenizer.fromString(referenceJson(path.join(modelDir, "tokenizer.json")));
  const encoded = await tok.encodeBatch(lines, { addSpecialTokens: false });
  const want = encoded.map((e) => e.getIds());
  const wantText = await tok.decodeBatch(want, false);

  const texts = path.join(work, "lines.jsonl");
  fs.writeFileSync(texts, lines.map((l) => JSON.stringify(l)).join("\n") + "\n");
  const got = brigadeLines(brigade, ["tokenize", "--model", modelDir, "--jsonl", texts, "--json"]);
  const ids = path.join(work, "ids.jsonl");
  fs.writeFileSync(ids, got.map((g) => JSON.stringify(g.ids)).join("\n") + "\n");
  const decoded = brigadeLines(brigade, ["detokenize", "--model", modelDir, "--jsonl", ids]);

  let idDiffs = 0, textDiffs = 0, tokens = 0;
  lines.forEach((line, i) => {
    tokens += want[i].length;
    if (JSON.stringify(want[i]) !== JSON.stringify(got[i].ids)) {
      if (idDiffs++ < 5) {
        console.log(`MISMATCH line ${i} ${JSON.stringify(line)}\n  library: ` +
          `${JSON.stringify(want[i])}\n  brigade: ${JSON.stringify(got[i].ids)}`);
      }
    }
    if (decoded[i] !== wantText[i] || decoded[i] !== line) textDiffs++;
  });
  console.log(`${lines.length} lines, ${tokens} tokens: ${idDiffs} differ in ids, ` +
    `${textDiffs} decode differently or not back to the line`);
  process.exit(idDiffs === 0 && textDiffs === 0 && lines.length > 0 ? 0 : 1);
}

main().catch((e) => {
  console.error(e.stack || String(e));
  process.exit(1);
});
