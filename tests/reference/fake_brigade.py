#!/usr/bin/python3
"""A stand-in for the brigade binary's make-model and generate commands, for testing the driver.

It answers the same command lines as brigade but computes with the reference model, so that
check_brigade.py's plumbing (arguments, files, JSON, row alignment, failure reports) can be tested
before and apart from brigade's engine. It is never the thing under test.

Fault switches, for proving that the driver can fail:
  FAKE_BRIGADE_PERTURB=ROW:DELTA  add DELTA to every logit of row ROW.
  FAKE_BRIGADE_WRONG_PICK=ROW     choose the second-best token at row ROW instead of the best.
  FAKE_BRIGADE_UNSUPPORTED=F,G    refuse checkpoints of model_type F or G as brigade refuses a
                                  family it does not load (exit 1, "... is not supported").
"""

import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from random_checkpoint import build_config, write_random_checkpoint  # noqa: E402
from reference_model import ReferenceModel  # noqa: E402

DTYPES = {"float32": "F32", "bfloat16": "BF16", "float16": "F16"}


def make_model(argv):
    p = argparse.ArgumentParser(prog="fake_brigade make-model")
    p.add_argument("--family", required=True)
    p.add_argument("--out", required=True)
    for flag, default in (("layers", 2), ("hidden", 64), ("heads", 4), ("kv-heads", 2),
                          ("head-dim", None), ("experts", 4), ("top-k", 2), ("moe-inter", 32),
                          ("vocab", 256), ("seed", 1)):
        p.add_argument("--" + flag, type=int, default=default)
    p.add_argument("--dtype", default="float32", choices=sorted(DTYPES))
    a = p.parse_args(argv)
    config = build_config(a.family, layers=a.layers, hidden=a.hidden, heads=a.heads,
                          kv_heads=a.kv_heads, head_dim=a.head_dim, experts=a.experts,
                          top_k=a.top_k, moe_inter=a.moe_inter, vocab=a.vocab,
                          bos_token_id=0)
    write_random_checkpoint(a.out, config, DTYPES[a.dtype], a.seed)
    with open(os.path.join(a.out, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump({"fake": True, "vocab_size": a.vocab}, f)
    return 0


def generate(argv):
    p = argparse.ArgumentParser(prog="fake_brigade generate")
    p.add_argument("--model", required=True)
    p.add_argument("--prompt-ids", required=True)
    p.add_argument("--max-tokens", type=int, required=True)
    p.add_argument("--temperature", type=float, default=0.0)
    p.add_argument("--json", action="store_true")
    p.add_argument("--logits-out")
    p.add_argument("--ignore-eos", action="store_true")
    p.add_argument("--speculate", type=int, default=0)  # Plain decoding is what it verifies to.
    a = p.parse_args(argv)
    with open(os.path.join(a.model, "config.json"), encoding="utf-8") as f:
        model_type = json.load(f).get("model_type")
    if model_type in os.environ.get("FAKE_BRIGADE_UNSUPPORTED", "").split(","):
        print(f"brigade generate: {a.model}/config.json: model_type '{model_type}' is not "
              f"supported (supported: qwen3_moe, mixtral, olmoe, qwen2_moe)", file=sys.stderr)
        return 1
    model = ReferenceModel.load(a.model)
    perturb_row, delta = -1, 0.0
    if os.environ.get("FAKE_BRIGADE_PERTURB"):
        row, value = os.environ["FAKE_BRIGADE_PERTURB"].split(":")
        perturb_row, delta = int(row), float(value)
    wrong_row = int(os.environ.get("FAKE_BRIGADE_WRONG_PICK", "-1"))
    cache = model.new_cache()
    logits = model.forward([int(t) for t in a.prompt_ids.split(",")], cache)[-1]
    ids, rows = [], []
    for step in range(a.max_tokens):
        row = logits.astype(np.float32)
        if step == perturb_row:
            row = row + np.float32(delta)
        order = np.argsort(-logits)
        ids.append(int(order[1] if step == wrong_row else order[0]))
        rows.append(row)
        logits = model.forward([ids[-1]], cache)[-1]
    if a.logits_out:
        np.save(a.logits_out, np.array(rows, dtype=np.float32))
    print(json.dumps({"ids": ids, "text": ""}) if a.json else " ".join(map(str, ids)))
    return 0


def main(argv):
    commands = {"make-model": make_model, "generate": generate}
    if not argv or argv[0] not in commands:
        print(f"usage: fake_brigade.py {{{','.join(commands)}}} ...", file=sys.stderr)
        return 2
    return commands[argv[0]](argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
