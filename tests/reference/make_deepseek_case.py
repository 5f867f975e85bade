#!/usr/bin/python3
"""Write one random deepseek_v3 checkpoint and its reference greedy run, for engine development.

  make_deepseek_case.py OUT_DIR [--case NAME] [--dtype D] [--seed N] [--set FIELD=JSON ...]
                        [--steps N] [--brigade BIN]
  make_deepseek_case.py OUT_DIR --compare BRIGADE_LOGITS.npy
  make_deepseek_case.py --list

The checkpoint is one of the deepseek_v3 cases of cases.py (default: the first), written by this
directory's writer exactly as check_brigade.py writes it (config.json, model.safetensors or shards
with an index, Hugging Face tensor names), optionally with another dtype, seed or config fields
(--set q_lora_rank=null --set 'rope_scaling={"type": "yarn", ...}'). Next to it go

  reference.json          the prompt ids, the reference's greedy ids and the brigade command line
  reference_logits.npy    float32 [steps, vocab]: row i holds the logits generated token i came
                          from, as `brigade generate --logits-out` writes them

With --brigade, a qwen3_moe `make-model` of the same vocabulary provides tokenizer.json (brigade's
generate --prompt-ids does not need one). --compare reads a --logits-out file of brigade's run of
the printed command and reports the largest difference and the first row beyond 1e-4. The full
check, with brigade's own greedy choices, stays `check_brigade.py BRIGADE --case NAME`.
"""

import argparse
import json
import os
import shutil
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cases import CASES  # noqa: E402
from check_brigade import (DTYPE_NAMES, LOGIT_TOLERANCE, TOKENIZER_FILES,  # noqa: E402
                           describe, prompt_for, run_brigade, tokenizer_source_args)
from random_checkpoint import build_config, write_random_checkpoint  # noqa: E402
from reference_model import ReferenceModel, greedy  # noqa: E402

DEEPSEEK_CASES = [c for c in CASES if c["family"] == "deepseek_v3"]


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out_dir", nargs="?", help="directory to write (created)")
    parser.add_argument("--list", action="store_true", help="list the deepseek_v3 cases")
    parser.add_argument("--case", default=DEEPSEEK_CASES[0]["name"],
                        help="which deepseek_v3 case of cases.py (default %(default)s)")
    parser.add_argument("--dtype", choices=sorted(DTYPE_NAMES), help="override the case's dtype")
    parser.add_argument("--seed", type=int, help="override the case's seed")
    parser.add_argument("--set", action="append", default=[], metavar="FIELD=JSON",
                        help="set a config.json field (value parsed as JSON; repeatable)")
    parser.add_argument("--steps", type=int, default=32, help="greedy steps (default 32)")
    parser.add_argument("--brigade", help="brigade binary, to add a tokenizer via make-model")
    parser.add_argument("--compare", metavar="NPY",
                        help="compare brigade's --logits-out file with OUT_DIR's reference")
    args = parser.parse_args(argv)
    if not args.list and not args.out_dir:
        parser.error("OUT_DIR is required")
    return args


def chosen_case(args):
    case = next((c for c in DEEPSEEK_CASES if c["name"] == args.case), None)
    if case is None:
        raise SystemExit(f"unknown case {args.case!r}; --list shows the deepseek_v3 cases")
    case = dict(case, config=dict(case["config"]))
    if args.dtype:
        case["dtype"] = args.dtype
    if args.seed is not None:
        case["seed"] = args.seed
    for item in args.set:
        field, sep, text = item.partition("=")
        if not sep:
            raise SystemExit(f"--set {item!r}: expected FIELD=JSON")
        try:
            case["config"][field] = json.loads(text)
        except json.JSONDecodeError:
            case["config"][field] = text  # A bare string.
    return case


def add_tokenizer(case, brigade, out_dir):
    with tempfile.TemporaryDirectory() as tmp:
        source = os.path.join(tmp, "tokenizer_source")
        run_brigade(os.path.abspath(brigade), tokenizer_source_args(case, source),
                    os.path.join(tmp, "brigade.log"))
        with open(os.path.join(source, "config.json"), encoding="utf-8") as f:
            special = {k: v for k, v in json.load(f).items()
                       if k in ("bos_token_id", "eos_token_id", "pad_token_id")}
        for name in TOKENIZER_FILES:
            if os.path.exists(os.path.join(source, name)):
                shutil.copy(os.path.join(source, name), os.path.join(out_dir, name))
    return special


def write_case(args):
    case = chosen_case(args)
    os.makedirs(args.out_dir, exist_ok=True)
    special = add_tokenizer(case, args.brigade, args.out_dir) if args.brigade else {}
    config = build_config("deepseek_v3", **case["shape"], **special, **case["config"])
    write_random_checkpoint(args.out_dir, config, DTYPE_NAMES[case["dtype"]], case["seed"],
                            shards=case.get("shards", 1), scales=case.get("tensor_scales"))
    model = ReferenceModel.load(args.out_dir)  # What was stored, bfloat16 rounding included.
    eos = special.get("eos_token_id")
    avoid = set(eos) if isinstance(eos, list) else ({eos} if eos is not None else set())
    prompt = prompt_for(case, model.spec.vocab, avoid)
    ids, rows = greedy(model, prompt, args.steps)
    np.save(os.path.join(args.out_dir, "reference_logits.npy"), rows.astype(np.float32))
    command = ["brigade", "generate", "--model", os.path.abspath(args.out_dir), "--prompt-ids",
               ",".join(map(str, prompt)), "--max-tokens", str(args.steps), "--temperature", "0",
               "--ignore-eos", "--json", "--logits-out", "brigade_logits.npy"]
    s = model.spec
    summary = {"case": case["name"], "describe": describe(case), "dtype": case["dtype"],
               "seed": case["seed"], "prompt_ids": prompt, "greedy_ids": ids,
               "brigade_command": " ".join(command),
               "softmax_scale": s.softmax_scale, "rope_attention_factor": s.rope_attention_factor,
               "rope_inv_freq": [float(f) for f in s.rope_inv_freq],
               "min_router_gap": model.min_router_gap}
    with open(os.path.join(args.out_dir, "reference.json"), "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=2)
        f.write("\n")
    print(f"wrote {case['name']} ({case['dtype']}, seed {case['seed']}) to {args.out_dir}\n"
          f"  {describe(case)}\n  prompt ids {prompt}\n  reference greedy ids {ids}\n"
          f"  softmax scale {s.softmax_scale:.6g}, cos/sin factor {s.rope_attention_factor:.6g}, "
          f"smallest router gap {model.min_router_gap:.2e}\n"
          f"compare with:\n  {' '.join(command)}\n"
          f"  {sys.argv[0]} {args.out_dir} --compare brigade_logits.npy")
    return 0


def compare(args):
    with open(os.path.join(args.out_dir, "reference.json"), encoding="utf-8") as f:
        summary = json.load(f)
    want = np.load(os.path.join(args.out_dir, "reference_logits.npy")).astype(np.float64)
    got = np.load(args.compare).astype(np.float64)
    rows = min(len(want), len(got))
    if rows == 0 or got.shape[1:] != want.shape[1:]:
        raise SystemExit(f"brigade logits {got.shape}, reference {want.shape}")
    # Rows after the first differing id follow other sequences and are not comparable.
    diff = np.abs(got[:rows] - want[:rows])
    worst = float(diff.max())
    bad = np.nonzero(diff.max(axis=1) > LOGIT_TOLERANCE)[0]
    brigade_ids = [int(np.argmax(r)) for r in got[:rows]]
    same_ids = brigade_ids == summary["greedy_ids"][:rows]
    print(f"{rows} rows, max |brigade - reference| = {worst:.3e} (tolerance "
          f"{LOGIT_TOLERANCE:g}); brigade's argmax ids {'match' if same_ids else 'DIFFER from'} "
          f"the reference's")
    if len(bad):
        row = int(bad[0])
        col = int(np.argmax(diff[row]))
        print(f"first row beyond tolerance: {row}, token {col}: brigade {got[row, col]:.6f} "
              f"reference {want[row, col]:.6f}")
    if not same_ids:
        first = next(i for i, (a, b) in enumerate(zip(brigade_ids, summary["greedy_ids"]))
                     if a != b)
        print(f"first different id at row {first}: later rows follow different sequences; "
              f"check_brigade.py recomputes the reference on brigade's own ids")
    return 0 if worst <= LOGIT_TOLERANCE and same_ids else 1


def main(argv):
    args = parse_args(argv)
    if args.list:
        for c in DEEPSEEK_CASES:
            print(f"{c['name']:34} {c['dtype']:9} {describe(c)}")
        return 0
    return compare(args) if args.compare else write_case(args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
