#!/usr/bin/env python3
"""The trained default pair (models/default, made by scripts/train_default_pair.py) scored by
brigade itself on held-out text it never trained on (models/default/heldout.txt): brigade
tokenizes the text, `brigade serve --engine` returns each token's log-probability (echo with
max_tokens 0), and the perplexity over windows of WINDOW_TOKENS tokens (each scored from its
second token, as the training script scores it) must stay under the bounds below, and far under
that of a random checkpoint of the target's shape (`brigade make-model`, given the same
tokenizer).

Usage: perplexity_test.py BRIGADE_BIN [WORKDIR [MODELS_DIR]]
(MODELS_DIR: another output of the training script, default models/default)
"""
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
from brigade_server import brigade_server  # noqa: E402

MODELS = os.path.normpath(os.path.join(HERE, "..", "..", "models", "default"))
if len(sys.argv) > 3:
    MODELS = os.path.abspath(sys.argv[3])
# The training script's evaluation window (SIZES["full"]["seq"] in scripts/train_default_pair.py).
WINDOW_TOKENS = 512
# 1.2 x what scripts/train_default_pair.py measured on heldout.txt (training_report.json,
# figures.heldout_txt): target 120.21, draft 127.59 (docs/default_model.md).
MAX_PERPLEXITY = {"target": 144.3, "draft": 153.1}
# A trained model must beat a random one of the same shape by at least this factor.
MIN_GAIN_OVER_RANDOM = 10.0


def run(args):
    return subprocess.run(args, capture_output=True, text=True, check=True).stdout


def heldout_ids(brigade, model_dir, work):
    """brigade's ids of the whole held-out sample."""
    with open(os.path.join(MODELS, "heldout.txt"), encoding="utf-8") as f:
        text = f.read()
    jsonl = os.path.join(work, "heldout.jsonl")
    with open(jsonl, "w", encoding="utf-8") as f:
        f.write(json.dumps(text) + "\n")
    return json.loads(run([brigade, "tokenize", "--model", model_dir, "--jsonl", jsonl,
                           "--json"]))["ids"]


def perplexity(brigade, model_dir, ids, work, label):
    """exp(mean negative log-likelihood) of ids under the model, window by window."""
    manifest = os.path.join(work, f"{label}.yaml")
    with open(manifest, "w") as f:
        f.write(f"model: {model_dir}\n")
    srv = brigade_server(brigade, manifest, os.path.join(work, f"{label}-serve.log"),
                         extra_args=["--engine"])
    try:
        name = srv.get("/v1/models")["data"][0]["id"]
        nll, count = 0.0, 0
        for start in range(0, len(ids), WINDOW_TOKENS):
            window = ids[start:start + WINDOW_TOKENS]
            if len(window) < 2:
                continue
            r = srv.post("/v1/completions", dict(model=name, prompt=window, echo=True,
                                                 max_tokens=0, logprobs=0))
            scores = r["choices"][0]["logprobs"]["token_logprobs"]
            assert len(scores) == len(window) and scores[0] is None, (len(scores), scores[:2])
            nll -= sum(scores[1:])
            count += len(window) - 1
    finally:
        srv.stop()
    return math.exp(nll / count), count


def random_twin(brigade, work):
    """A random checkpoint of the target's shape (make-model), with the trained tokenizer."""
    with open(os.path.join(MODELS, "target", "config.json")) as f:
        c = json.load(f)
    out = os.path.join(work, "random")
    run([brigade, "make-model", "--family", c["model_type"], "--out", out,
         "--layers", str(c["num_hidden_layers"]), "--hidden", str(c["hidden_size"]),
         "--heads", str(c["num_attention_heads"]), "--kv-heads", str(c["num_key_value_heads"]),
         "--head-dim", str(c["head_dim"]), "--experts", str(c["num_experts"]),
         "--top-k", str(c["num_experts_per_tok"]), "--moe-inter",
         str(c["moe_intermediate_size"]), "--vocab", str(c["vocab_size"]),
         "--max-positions", str(c["max_position_embeddings"]), "--seed", "7"])
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(MODELS, "target", name), os.path.join(out, name))
    return out


def main():
    brigade = sys.argv[1]
    if len(sys.argv) > 2:
        shutil.rmtree(sys.argv[2], ignore_errors=True)
        os.makedirs(sys.argv[2])
        return check(brigade, sys.argv[2])
    with tempfile.TemporaryDirectory(prefix="default-model-") as work:
        return check(brigade, work)


def check(brigade, work):
    ids = heldout_ids(brigade, os.path.join(MODELS, "target"), work)
    found = {}
    for label in ("target", "draft"):
        found[label], count = perplexity(brigade, os.path.join(MODELS, label), ids, work, label)
        print(f"{label}: perplexity {found[label]:.2f} over {count} held-out tokens "
              f"(bound {MAX_PERPLEXITY[label]})")
    found["random"], _ = perplexity(brigade, random_twin(brigade, work), ids, work, "random")
    print(f"random checkpoint of the target's shape: perplexity {found['random']:.2f}")
    failures = [f"{label} perplexity {found[label]:.2f} is over its bound {bound}"
                for label, bound in MAX_PERPLEXITY.items() if found[label] > bound]
    if found["target"] * MIN_GAIN_OVER_RANDOM > found["random"]:
        failures.append(f"the target ({found['target']:.2f}) is not {MIN_GAIN_OVER_RANDOM}x "
                        f"better than a random checkpoint ({found['random']:.2f})")
    for f in failures:
        print("FAIL:", f)
    print("PASS" if not failures else "FAILED")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
