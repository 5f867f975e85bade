// Writes a copy of a legacy Llama/Mistral tokenizer (normalizer Prepend + Replace, no
// pre-tokenizer) that uses the Metaspace pre-tokenizer and decoder instead, in the form version
// 0.13 of the Hugging Face library reads (add_prefix_space, which newer versions read as
// prepend_scheme "always"). The same vocabulary then checks brigade's Metaspace against the
// reference.
//
// usage: node metaspace_variant.js SOURCE_DIR OUT_DIR
"use strict";
const fs = require("fs");
const path = require("path");

const [source, out] = process.argv.slice(2);
if (!out) {
  console.error("usage: node metaspace_variant.js SOURCE_DIR OUT_DIR");
  process.exit(2);
}
const tok = JSON.parse(fs.readFileSync(path.join(source, "tokenizer.json"), "utf8"));
const metaspace = { type: "Metaspace", replacement: "\u2581", add_prefix_space: true };
tok.normalizer = null;
tok.pre_tokenizer = metaspace;
tok.decoder = { type: "Sequence", decoders: [{ type: "ByteFallback" }, metaspace] };
fs.mkdirSync(out, { recursive: true });
fs.writeFileSync(path.join(out, "tokenizer.json"), JSON.stringify(tok));
const config = "tokenizer_config.json";
fs.copyFileSync(path.join(source, config), path.join(out, config));
