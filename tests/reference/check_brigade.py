#!/usr/bin/python3
"""Oracle test: brigade's greedy logits must match the independent float64 reference.

For every case, a checkpoint is made (by `brigade make-model`, or by this directory's own
safetensors writer so that brigade's loader meets files it did not write), brigade generates
greedily with --logits-out, and the reference recomputes the logits of every generated row from
prompt + generated ids. A case passes when max |brigade - reference| <= 1e-4 over all rows and every
id brigade chose is the argmax of the reference row (a different id is accepted only when its
reference logit is within 1e-4 of the maximum, a tie at float32 precision).

With --kv-dtype bf16, brigade keeps its KV cache in bfloat16 (generate --kv-dtype bf16): the rows
must then match within BF16_KV_LOGIT_TOLERANCE, the bound docs/kvcache.md states, and a chosen id
may differ from the reference argmax only by that much.

With --kernels avx512_bf16, brigade runs its bf16 dot-product CPU kernels (BRIGADE_CPU_KERNELS),
which round activations to bf16 where they meet bf16 weights: another numerics class, checked
within BF16_DOT_LOGIT_TOLERANCE (docs/cpu_kernels.md). Where the CPU lacks AVX512-BF16 the run
is skipped (exit code 77).

With --speculate N, brigade drafts up to N tokens per step by prompt lookup and verifies them in
one step; the rows must match the reference all the same, and some drafts must have been accepted
(otherwise the run would only repeat the plain one).

A case of a family listed in cases.PENDING_FAMILIES (brigade's support for it is being written)
is SKIPPED, not failed, when brigade's generate refuses its checkpoint as unsupported; the skip
names brigade's message. Every other error and every mismatch fails, and --strict fails the skips
too. So such a case starts checking by itself the day brigade loads the family.

Usage: check_brigade.py BRIGADE_BIN [--quick] [--case NAME ...] [--workdir DIR] [--steps N]
                        [--speculate N] [--kv-dtype f32|bf16] [--kernels PATH] [--strict]
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cases import COMMITTED_MODELS  # noqa: E402
from cases import CASES, MAKE_MODEL_FLAGS, PENDING_FAMILIES  # noqa: E402
from random_checkpoint import build_config, write_random_checkpoint  # noqa: E402
from reference_model import ReferenceModel  # noqa: E402
from safetensors_np import checkpoint_files, read_header  # noqa: E402

REPO_ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
LOGIT_TOLERANCE = 1e-4
TIE_TOLERANCE = 1e-4
# With a bf16 KV cache every key and value is rounded to 8 significant bits (relative error up to
# 2^-9). Measured over 32 greedy rows of each qwen3_moe and deepseek_v3 case of
# reference.logits_match_bf16_kv: worst 2.98e-2 (own_qwen3_moe_step2_tied_f32, logits near 9),
# most cases 3e-3 to 1.6e-2 (docs/kvcache.md). The bound leaves a margin of about 3x. A case
# whose router's top-k margin is smaller than that perturbation may pick another expert and then
# differs by far more (own_deepseek_v3_noqlora_yarn_bf16: 1.38): such cases are not run with it.
BF16_KV_LOGIT_TOLERANCE = 1e-1
# The bf16 dot-product kernels round each activation to bf16 (a relative error of up to 2^-9)
# before every matmul with bf16 weights: the same order of perturbation as a bf16 KV cache.
BF16_DOT_LOGIT_TOLERANCE = 1e-1


def tolerance_for(kv_dtype, kernels, weights="bfloat16"):
    """The bound for a run; the bf16 dot-product kernels multiply f32 and f16 weights exactly."""
    rounded = kernels == "avx512_bf16" and weights == "bfloat16"
    if kv_dtype == "bf16" or rounded:
        return max(BF16_KV_LOGIT_TOLERANCE, BF16_DOT_LOGIT_TOLERANCE)
    return LOGIT_TOLERANCE
# Router logits of the k-th and (k+1)-th expert closer than this are a near tie: float32 rounding
# may legitimately pick either expert, so a failure after one is reported as such.
ROUTER_TIE = 1e-5
COMMAND_TIMEOUT_S = 600
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "generation_config.json",
                   "special_tokens_map.json")
DTYPE_NAMES = {"float32": "F32", "bfloat16": "BF16", "float16": "F16"}
# How brigade words a refusal of a model it cannot run (config.cpp: "model_type '...' is not
# supported (supported: ...)"; errc::unsupported messages in general).
UNSUPPORTED = re.compile(r"not supported|unsupported", re.IGNORECASE)
# The small shape of the make-model run that only provides a tokenizer (tokenizer_family cases).
TOKENIZER_SOURCE_SHAPE = {"layers": 1, "hidden": 32, "heads": 2, "kv_heads": 1, "head_dim": 16,
                          "experts": 2, "top_k": 1, "moe_inter": 16}


class CaseFailure(Exception):
    """A case failed; the message says why and how to reproduce it."""

    def __init__(self, message, max_err=None, stderr=""):
        super().__init__(message)
        self.max_err = max_err
        self.stderr = stderr


class CaseSkipped(Exception):
    """brigade does not load this case's family yet (cases.PENDING_FAMILIES)."""


def run_brigade(brigade, args, log_path):
    cmd = [brigade] + [str(a) for a in args]
    started = time.monotonic()
    try:
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              timeout=COMMAND_TIMEOUT_S)
    except subprocess.TimeoutExpired as e:
        raise CaseFailure(f"timed out after {COMMAND_TIMEOUT_S} s: {' '.join(cmd)}") from e
    out, err = proc.stdout.decode("utf-8", "replace"), proc.stderr.decode("utf-8", "replace")
    with open(log_path, "a", encoding="utf-8") as log:
        log.write(f"$ {' '.join(cmd)}\n# exit {proc.returncode} after "
                  f"{time.monotonic() - started:.2f} s\n{out}\n{err}\n")
    if proc.returncode != 0:
        raise CaseFailure(f"exit {proc.returncode}: {' '.join(cmd)}\n{err.strip()[-2000:]}",
                          stderr=err)
    return out


def make_model_args(case, out_dir):
    args = ["make-model", "--family", case["family"], "--out", out_dir]
    for key, flag in MAKE_MODEL_FLAGS:
        if key in case["shape"]:
            args += [flag, case["shape"][key]]
    return args + ["--dtype", case["dtype"], "--seed", case["seed"]]


def tokenizer_source_args(case, out_dir):
    """make-model arguments for the checkpoint whose tokenizer a writer case borrows: the case's
    own family and shape, or, with tokenizer_family (a family make-model does not write), a small
    model of that family with the case's vocabulary."""
    family = case.get("tokenizer_family")
    if not family:
        return make_model_args(case, out_dir)
    shape = dict(TOKENIZER_SOURCE_SHAPE, vocab=case["shape"]["vocab"])
    return make_model_args(dict(case, family=family, shape=shape, dtype="float32"), out_dir)


def check_written_model(case, model_dir):
    """make-model must have honoured the family, shape and dtype it was asked for."""
    with open(os.path.join(model_dir, "config.json"), encoding="utf-8") as f:
        config = json.load(f)
    if config.get("model_type") != case["family"]:
        raise CaseFailure(f"config.json model_type {config.get('model_type')!r}, "
                          f"expected {case['family']!r}")
    wanted = {"layers": "num_hidden_layers", "hidden": "hidden_size",
              "heads": "num_attention_heads", "kv_heads": "num_key_value_heads",
              "head_dim": "head_dim", "top_k": "num_experts_per_tok", "vocab": "vocab_size",
              "experts": "num_local_experts" if case["family"] == "mixtral" else "num_experts"}
    for key, field in wanted.items():
        if key in case["shape"] and config.get(field, case["shape"][key]) != case["shape"][key]:
            raise CaseFailure(f"config.json {field} = {config.get(field)}, asked for "
                              f"{case['shape'][key]}")
    # Every matrix must be stored in the requested dtype, so that the case exercises that
    # conversion; vectors (norm weights, biases) may also be kept in F32.
    stored = DTYPE_NAMES[case["dtype"]]
    files, _ = checkpoint_files(model_dir)
    for path in files:
        header, _, _ = read_header(path)
        for name, entry in header.items():
            allowed = {stored} if len(entry["shape"]) > 1 else {stored, "F32"}
            if entry["dtype"] not in allowed:
                raise CaseFailure(f"{path}: {name} is stored as {entry['dtype']}, asked for "
                                  f"{stored}")


def write_own_model(case, brigade, case_dir, log_path):
    """Write the case's checkpoint with this directory's writer, plus a brigade tokenizer."""
    shape = case["shape"]
    source_dir = os.path.join(case_dir, "tokenizer_source")
    run_brigade(brigade, tokenizer_source_args(case, source_dir), log_path)
    with open(os.path.join(source_dir, "config.json"), encoding="utf-8") as f:
        source_config = json.load(f)
    special = {k: source_config[k] for k in ("bos_token_id", "eos_token_id", "pad_token_id")
               if k in source_config}
    config = build_config(case["family"], **shape, **special, **case.get("config", {}))
    model_dir = os.path.join(case_dir, "model")
    write_random_checkpoint(model_dir, config, DTYPE_NAMES[case["dtype"]], case["seed"],
                            shards=case.get("shards", 1), scales=case.get("tensor_scales"))
    for name in TOKENIZER_FILES:
        if os.path.exists(os.path.join(source_dir, name)):
            shutil.copy(os.path.join(source_dir, name), os.path.join(model_dir, name))
    return model_dir


def eos_ids(model_dir):
    with open(os.path.join(model_dir, "config.json"), encoding="utf-8") as f:
        eos = json.load(f).get("eos_token_id")
    if eos is None:
        return set()
    return set(eos) if isinstance(eos, list) else {eos}


def prompt_for(case, vocab, avoid):
    rng = np.random.default_rng(case["seed"] + 7919)
    length = int(rng.integers(4, 9))
    choices = [t for t in range(vocab) if t not in avoid]
    return [int(t) for t in rng.choice(choices, size=length)]


def json_reply(stdout, key, kind):
    """The last line of stdout that is a JSON object whose `key` is a `kind`, or None."""
    for line in reversed(stdout.strip().splitlines()):
        try:
            reply = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(reply, dict) and isinstance(reply.get(key), kind):
            return reply
    return None


def parse_generated(stdout, prompt, rows):
    """The generated ids from generate --json's output (a line holding {"ids": [...]})."""
    reply = json_reply(stdout, "ids", list)
    if reply is None:
        raise CaseFailure(f"generate --json printed no {{\"ids\": [...]}} line:\n{stdout[-1000:]}")
    ids = [int(t) for t in reply["ids"]]
    if len(ids) == len(prompt) + rows and ids[:len(prompt)] == prompt:
        ids = ids[len(prompt):]  # Accept an echo of the prompt before the new ids.
    return ids


def accepted_drafts(stdout):
    """Draft tokens generate --json reports accepted (0 when it reports no speculation)."""
    reply = json_reply(stdout, "speculation", dict)
    return 0 if reply is None else int(reply["speculation"].get("accepted_tokens", 0))


def run_generate(case, brigade, model_dir, case_dir, prompt, steps, speculate, log_path,
                 kv_dtype="f32"):
    logits_path = os.path.join(case_dir, "brigade_logits.npy")
    args = ["generate", "--model", model_dir, "--prompt-ids", ",".join(str(t) for t in prompt),
            "--max-tokens", steps, "--temperature", 0, "--ignore-eos", "--json", "--logits-out",
            logits_path, "--speculate", speculate]
    if kv_dtype != "f32":
        args += ["--kv-dtype", kv_dtype]
    stdout = run_brigade(brigade, args, log_path)
    logits = np.load(logits_path)
    if logits.dtype != np.float32 or logits.ndim != 2:
        raise CaseFailure(f"{logits_path}: {logits.dtype} {logits.shape}, expected float32 "
                          f"[rows, vocab]")
    generated = parse_generated(stdout, prompt, logits.shape[0])
    if len(generated) != logits.shape[0]:
        raise CaseFailure(f"{len(generated)} generated ids but {logits.shape[0]} logits rows")
    # --ignore-eos asks for every step, so the comparison always covers `steps` rows.
    if len(generated) != steps:
        raise CaseFailure(f"{len(generated)} tokens generated with --ignore-eos, asked for {steps}")
    return generated, logits, accepted_drafts(stdout)


def compare(case, prompt, generated, got, want, router_gap, tolerance=LOGIT_TOLERANCE):
    """Check brigade's rows against the reference rows within `tolerance` (it bounds the logits
    and the gap of a near tie alike); return the max abs error."""
    if got.shape != want.shape:
        raise CaseFailure(f"brigade logits {got.shape}, reference {want.shape}")
    if not np.all(np.isfinite(got)):
        raise CaseFailure(f"brigade logits hold non-finite values (first row "
                          f"{int(np.argmax(~np.all(np.isfinite(got), axis=1)))})")
    diff = np.abs(got.astype(np.float64) - want)
    max_err = float(diff.max())
    tie_note = (f"; the reference router had a near tie (gap {router_gap:.2e}), so float32 may "
                f"route differently: try another seed" if router_gap < ROUTER_TIE else "")
    if max_err > tolerance:
        row = int(np.argmax(diff.max(axis=1) > tolerance))
        col = int(np.argmax(diff[row]))
        raise CaseFailure(
            f"max |brigade - reference| = {max_err:.3e} > {tolerance:g}; first differing "
            f"row {row} (position {len(prompt) + row - 1}, after ids "
            f"{(prompt + generated)[:len(prompt) + row]}): "
            f"token {col} brigade {got[row, col]:.6f} reference {want[row, col]:.6f}, row max "
            f"error {diff[row].max():.3e}; {int(np.sum(diff.max(axis=1) > tolerance))} of "
            f"{diff.shape[0]} rows differ{tie_note}", max_err)
    for row, chosen in enumerate(generated):
        best = int(np.argmax(want[row]))
        if chosen != best and want[row, best] - want[row, chosen] >= tolerance:
            raise CaseFailure(f"row {row}: brigade chose {chosen} but the reference argmax is "
                              f"{best} by {want[row, best] - want[row, chosen]:.3e}{tie_note}",
                              max_err)
    return max_err


def pending_refusal(case, failure):
    """The reason to skip when brigade refused a case of a family it does not load yet."""
    family = case["family"]
    if family not in PENDING_FAMILIES or not UNSUPPORTED.search(failure.stderr or ""):
        return None
    lines = [l.strip() for l in failure.stderr.strip().splitlines() if UNSUPPORTED.search(l)]
    return (f"brigade does not load {family} yet ({PENDING_FAMILIES[family]}); it said: "
            f"{lines[-1][:300]}")


def run_case(case, brigade, workdir, steps, speculate, strict=False, kv_dtype="f32",
             kernels=None):
    case_dir = os.path.join(workdir, case["name"])
    shutil.rmtree(case_dir, ignore_errors=True)
    os.makedirs(case_dir)
    log_path = os.path.join(case_dir, "brigade.log")
    if case["source"] == "make-model":
        model_dir = os.path.join(case_dir, "model")
        run_brigade(brigade, make_model_args(case, model_dir), log_path)
        check_written_model(case, model_dir)
    elif case["source"] == "committed":
        model_dir = os.path.join(REPO_ROOT, COMMITTED_MODELS, case["name"].split("_", 1)[1])
        check_written_model(case, model_dir)
    else:
        model_dir = write_own_model(case, brigade, case_dir, log_path)
    reference = ReferenceModel.load(model_dir)
    if reference.unused_tensors:
        raise CaseFailure(f"checkpoint holds tensors outside the Hugging Face "
                          f"{case['family']} layout: {reference.unused_tensors[:5]}")
    prompt = prompt_for(case, reference.spec.vocab, eos_ids(model_dir))
    try:
        generated, got, accepted = run_generate(case, brigade, model_dir, case_dir, prompt,
                                                steps, speculate, log_path, kv_dtype)
    except CaseFailure as e:
        reason = None if strict else pending_refusal(case, e)
        if reason:
            raise CaseSkipped(reason) from e
        raise
    sequence = prompt + generated[:-1]
    want = reference.logits(sequence)[len(prompt) - 1:]
    tolerance = tolerance_for(kv_dtype, kernels, case["dtype"])
    max_err = compare(case, prompt, generated, got, want, reference.min_router_gap, tolerance)
    return {"rows": len(generated), "max_err": max_err, "router_gap": reference.min_router_gap,
            "accepted": accepted}


def _note(key, value):
    if key == "rope_scaling" and isinstance(value, dict):
        original = value.get("original_max_position_embeddings")
        return (f"yarn(factor={value.get('factor')},orig={original},"
                f"mscale={value.get('mscale')}/{value.get('mscale_all_dim')})")
    return f"{key}={value}"


def describe(case):
    s = case["shape"]
    kv_heads = s.get("heads", "?") if case["family"] == "deepseek_v3" else s.get("kv_heads", "?")
    text = (f"L{s.get('layers', '?')} h{s.get('hidden', '?')} H{s.get('heads', '?')}/"
            f"{kv_heads} d{s.get('head_dim', '-')} E{s.get('experts', '?')} "
            f"k{s.get('top_k', '?')}")
    extra = case.get("config", {})
    notes = [_note(k, v) for k, v in sorted(extra.items())]
    if case.get("shards", 1) > 1:
        notes.append(f"{case['shards']} shards")
    notes += [f"{k.lstrip('.')}x{v}" for k, v in sorted(case.get("tensor_scales", {}).items())]
    return text + (" " + " ".join(notes) if notes else "")


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("brigade", help="path of the brigade binary")
    parser.add_argument("--quick", action="store_true", help="only the cases marked quick")
    parser.add_argument("--case", action="append", default=[],
                        help="run only this case (repeatable; see --list)")
    parser.add_argument("--list", action="store_true", help="list the cases and exit")
    parser.add_argument("--workdir", help="where checkpoints and logs go (kept); default: a "
                        "temporary directory removed when every case passes")
    parser.add_argument("--steps", type=int, default=32, help="greedy steps per case")
    parser.add_argument("--speculate", type=int, default=0,
                        help="draft up to N tokens per step (brigade generate --speculate)")
    parser.add_argument("--kv-dtype", choices=("f32", "bf16"), default="f32",
                        help="brigade's KV cache element type (generate --kv-dtype); bf16 is "
                        "checked within BF16_KV_LOGIT_TOLERANCE")
    parser.add_argument("--kernels", help="brigade's CPU kernel path (BRIGADE_CPU_KERNELS); "
                        "avx512_bf16 is checked within BF16_DOT_LOGIT_TOLERANCE")
    parser.add_argument("--strict", action="store_true",
                        help="fail, rather than skip, cases of cases.PENDING_FAMILIES that "
                        "brigade refuses as unsupported")
    return parser.parse_args(argv)


def select_cases(args):
    cases = [c for c in CASES if not args.quick or c.get("quick")]
    if args.case:
        known = {c["name"] for c in CASES}
        unknown = sorted(set(args.case) - known)
        if unknown:
            raise SystemExit(f"unknown case(s) {unknown}; --list shows them")
        cases = [c for c in CASES if c["name"] in args.case]
    return cases


def main(argv):
    args = parse_args(argv)
    cases = select_cases(args)
    if args.list:
        for c in cases:
            print(f"{c['name']:34} {c['source']:10} {c['dtype']:9} {describe(c)}")
        return 0
    brigade = os.path.abspath(args.brigade)
    if args.kernels:
        os.environ["BRIGADE_CPU_KERNELS"] = args.kernels
        probe = subprocess.run([brigade, "tokenize", "--help"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
        if probe.returncode != 0:
            print(f"SKIP: brigade refuses BRIGADE_CPU_KERNELS={args.kernels}: "
                  f"{probe.stderr.strip()}")
            return 77
    workdir = args.workdir or tempfile.mkdtemp(prefix="brigade-oracle-")
    os.makedirs(workdir, exist_ok=True)
    print(f"{'case':34} {'source':10} {'dtype':9} {'rows':>4} {'max abs err':>11} "
          f"{'router gap':>10}  result")
    failures, skipped = [], []
    accepted = 0
    for case in cases:
        try:
            r = run_case(case, brigade, workdir, args.steps, args.speculate, args.strict,
                         args.kv_dtype, args.kernels)
            accepted += r["accepted"]
            gap = "-" if r["router_gap"] == float("inf") else f"{r['router_gap']:.2e}"
            print(f"{case['name']:34} {case['source']:10} {case['dtype']:9} {r['rows']:4d} "
                  f"{r['max_err']:11.3e} {gap:>10}  ok", flush=True)
        except CaseSkipped as e:
            skipped.append((case, e))
            print(f"{case['name']:34} {case['source']:10} {case['dtype']:9} {'':4} {'':>11} "
                  f"{'':10}  SKIP", flush=True)
        except Exception as e:  # One broken case must not hide the others.
            failures.append((case, e))
            err = getattr(e, "max_err", None)
            err = "" if err is None else f"{err:.3e}"
            print(f"{case['name']:34} {case['source']:10} {case['dtype']:9} {'':4} {err:>11} "
                  f"{'':10}  FAIL", flush=True)
    for case, e in failures:
        print(f"\nFAIL {case['name']} (family {case['family']}, {describe(case)}, dtype "
              f"{case['dtype']}, seed {case['seed']}): {type(e).__name__}: {e}\n  rerun: "
              f"{sys.argv[0]} {args.brigade} --case {case['name']} --workdir {workdir}\n"
              f"  logs: {os.path.join(workdir, case['name'], 'brigade.log')}")
    for case, e in skipped:
        print(f"\nSKIP {case['name']} (family {case['family']}, seed {case['seed']}): {e}\n"
              f"  the reference side ran (checkpoint written and loaded); the comparison starts "
              f"once brigade loads {case['family']}; --strict fails instead")
    matched = len(cases) - len(failures) - len(skipped)
    print(f"\n{matched}/{len(cases) - len(skipped)} cases match the reference "
          f"(tolerance {tolerance_for(args.kv_dtype, args.kernels):g}"
          f", KV {args.kv_dtype}, kernels {args.kernels or 'auto'}, {args.steps} greedy steps "
          f"each)"
          + (f"; {len(skipped)} skipped because brigade does not load "
             f"{', '.join(sorted({c['family'] for c, _ in skipped}))} yet" if skipped else ""))
    if args.speculate > 0:
        print(f"speculation: up to {args.speculate} drafts per step, {accepted} drafts accepted "
              f"over all cases")
        if accepted == 0 and not failures:
            print("FAIL no draft was accepted: the speculative run proved nothing beyond the plain one")
            return 1
    if not failures and not args.workdir:
        shutil.rmtree(workdir, ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
