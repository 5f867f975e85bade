"""Checks a written pair against brigade itself: brigade's tokenizer gives the ids of ours on
held-out lines and decodes them back; `brigade generate` gives torch's greedy tokens, from logits
torch also computes."""
import json
import os
import subprocess
import tempfile

import numpy as np
import torch

from . import training


def _run(args, stdin=None):
    done = subprocess.run(args, input=stdin, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed ({done.returncode}):\n{done.stderr}")
    return done.stdout


def _jsonl(path, values):
    with open(path, "w", encoding="utf-8") as f:
        for v in values:
            f.write(json.dumps(v, ensure_ascii=False) + "\n")


def check_tokenizer(brigade, model_dir, tok, lines, work):
    """(lines whose ids differ, lines that do not decode back to themselves) over lines."""
    texts = os.path.join(work, "lines.jsonl")
    _jsonl(texts, lines)
    out = _run([brigade, "tokenize", "--model", model_dir, "--jsonl", texts, "--json"])
    got = [json.loads(line)["ids"] for line in out.splitlines()]
    assert len(got) == len(lines), (len(got), len(lines))
    id_diffs = [i for i, text in enumerate(lines) if tok.encode(text) != got[i]]
    ids_file = os.path.join(work, "ids.jsonl")
    _jsonl(ids_file, got)
    out = _run([brigade, "detokenize", "--model", model_dir, "--jsonl", ids_file])
    decoded = [json.loads(line) for line in out.splitlines()]
    text_diffs = [i for i, text in enumerate(lines) if decoded[i] != text]
    return id_diffs, text_diffs


def check_greedy(brigade, model_dir, model, tok, prompt, steps, work):
    """brigade's and torch's greedy ids after prompt, the position of their first difference
    (None when equal), and the largest |logit| difference along brigade's path."""
    npy = os.path.join(work, "logits.npy")
    out = _run([brigade, "generate", "--model", model_dir, "--prompt", prompt, "--max-tokens",
                str(steps), "--temperature", "0", "--ignore-eos", "--json",
                "--logits-out", npy])
    got = json.loads(out)["ids"]
    prompt_ids = tok.encode(prompt)
    want = training.greedy(model, prompt_ids, steps)
    rows = np.load(npy)
    with torch.no_grad():
        logits, _ = model(torch.tensor([prompt_ids + got[:-1]], dtype=torch.int64))
    ours = logits[0, len(prompt_ids) - 1:].numpy()
    worst = float(np.abs(ours - rows).max())
    first = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), None)
    if first is None and len(got) != len(want):
        first = min(len(got), len(want))
    return {"prompt": prompt, "brigade_ids": got, "torch_ids": want, "first_difference": first,
            "max_abs_logit_difference": worst, "brigade_text": json.loads(out)["text"]}


def check_pair(brigade, out_dir, models, tok, lines, prompts, log, steps=32):
    """Runs every check on models {"target": model, "draft": model} (bf16 weights, float32) and
    returns the findings; logs a line per check."""
    report = {}
    with tempfile.TemporaryDirectory() as work:
        id_diffs, text_diffs = check_tokenizer(brigade, os.path.join(out_dir, "target"), tok,
                                               lines, work)
        log(f"check: tokenizer on {len(lines)} held-out lines: {len(id_diffs)} differ in ids, "
            f"{len(text_diffs)} do not decode back")
        report["tokenizer"] = {"lines": len(lines), "id_mismatches": id_diffs,
                               "round_trip_failures": text_diffs}
        for name, model in models.items():
            results = []
            for prompt in prompts:
                r = check_greedy(brigade, os.path.join(out_dir, name), model, tok, prompt, steps,
                                 work)
                same = "same" if r["first_difference"] is None else \
                    f"DIFFER from token {r['first_difference']}"
                log(f"check: {name} greedy {steps} tokens after {prompt!r}: {same}; "
                    f"max |logit difference| {r['max_abs_logit_difference']:.2e}")
                results.append(r)
            report[name] = results
    return report
