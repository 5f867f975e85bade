#!/usr/bin/python3
"""Trains brigade's default model pair on CPU: a byte-level BPE tokenizer, a small Qwen3-MoE
target and a dense Qwen3 draft distilled from it, all on the Python 3.11 documentation (Debian's
python3.11-doc, PSF License). Writes OUT/target and OUT/draft (Hugging Face checkpoints),
OUT/heldout.txt (held-out text for tests/default_model/perplexity_test.py), OUT/NOTICE (the
text's licence) and OUT/training_report.json (and OUT/check_report.json with
--check-with-brigade).

Needs Debian's python3-torch and python3-numpy (`apt-get install -y python3-torch
python3.11-doc`). The same --seed and --threads give the same files.

    /usr/bin/python3 scripts/train_default_pair.py --out models/default
    /usr/bin/python3 scripts/train_default_pair.py --out models/default --draft-only
    /usr/bin/python3 scripts/train_default_pair.py --out /tmp/tiny --size tiny \\
        --check-with-brigade build/brigade
"""
import argparse
import collections
import json
import os
import sys
import time

# OpenMP threads that spin while OpenBLAS's own threads run a matmul starve them on a two-core
# machine (training ran five times slower); passive waiting avoids that. Set before torch loads.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
import torch  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from default_pair import bpe, brigade_check, checkpoint, corpus, modeling, training  # noqa: E402

VOCAB = 4096
HELD_OUT_SAMPLE_BYTES = 40_000
CHECK_LINES = 300
CHECK_PROMPTS = ["The ", "import os\n", "This function returns", "class Example:\n    def "]

# Model shapes and step counts. "full" is the committed pair (about an hour on two cores);
# "tiny" checks the whole path against brigade in a few minutes.
SIZES = {
    "full": {
        # dense_inter only fills config.json's intermediate_size (no layer is dense).
        "target": dict(family="qwen3_moe", hidden=256, layers=4, heads=4, kv_heads=2,
                       head_dim=64, experts=16, top_k=4, moe_inter=128, dense_inter=512),
        "draft": dict(family="qwen3", hidden=128, layers=2, heads=4, kv_heads=2, head_dim=32,
                      dense_inter=384, tie_embeddings=True),
        "batch": 8, "seq": 512, "target_steps": 700, "draft_steps": 700,
        "target_lr": 3e-3, "draft_lr": 3e-3,
        # Each draft step: draft_batch real windows of seq tokens, and gen_batch sequences of
        # the target's own greedy text (gen_prompt tokens of training text, then gen_tokens the
        # target chose), generated gen_chunk at a time.
        "draft_batch": 4, "gen_batch": 16, "gen_prompt": 64, "gen_tokens": 80, "gen_chunk": 128,
    },
    "tiny": {
        "target": dict(family="qwen3_moe", hidden=64, layers=2, heads=4, kv_heads=2,
                       head_dim=16, experts=16, top_k=4, moe_inter=32, dense_inter=128),
        "draft": dict(family="qwen3", hidden=32, layers=1, heads=2, kv_heads=1, head_dim=16,
                      dense_inter=64, tie_embeddings=True),
        "batch": 4, "seq": 128, "target_steps": 60, "draft_steps": 30,
        "target_lr": 3e-3, "draft_lr": 3e-3,
        "draft_batch": 2, "gen_batch": 4, "gen_prompt": 32, "gen_tokens": 32, "gen_chunk": 32,
    },
}
AUX_LOSS_COEF = 0.01
# The draft's attention window as brigade runs it (draft/draft_settings.json): trained on windows
# of SIZES[...]["seq"] tokens, it guesses worse over positions beyond them, and 256 kept the most
# drafts and the most speed at 1,000-token prompts (docs/speculation.md, "The draft's attention
# window").
DRAFT_ATTENTION_WINDOW = 256


def log(message):
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="output directory (target/, draft/, ...)")
    p.add_argument("--seed", type=int, default=20240624)
    p.add_argument("--threads", type=int, default=2, help="torch threads")
    p.add_argument("--size", choices=sorted(SIZES), default="full")
    p.add_argument("--target-steps", type=int, help="override the size's step count")
    p.add_argument("--draft-steps", type=int, help="override the size's step count")
    p.add_argument("--check-with-brigade", metavar="BRIGADE",
                   help="compare brigade's tokenizer and greedy tokens with ours")
    p.add_argument("--check-only", action="store_true",
                   help="do not train: check the pair already in --out")
    p.add_argument("--draft-only", action="store_true",
                   help="train only the draft, against the target and tokenizer already in "
                        "--out; rewrites --out/draft and the report's draft figures")
    return p.parse_args()


def train_tokenizer(train_docs):
    pre = bpe.PreTokenizer()
    counts = collections.Counter()
    for _, text in train_docs:
        counts.update(pre.pieces(text))
    log(f"bpe: {sum(counts.values())} pieces, {len(counts)} distinct")
    return bpe.Tokenizer(bpe.train(counts, VOCAB, log))


def token_stream(tok, docs):
    """The documents' ids, each followed by <|endoftext|>."""
    end = tok.special_id(bpe.END_OF_TEXT)
    ids = []
    for _, text in docs:
        ids.extend(tok.encode(text))
        ids.append(end)
    return ids


def make_shape(spec, vocab):
    return modeling.Shape(vocab=vocab, **spec)


def init_models(args, size, vocab):
    """The freshly initialised target and draft: both drawn, in this order, from --seed (so
    --draft-only starts the draft from the same weights as a full run)."""
    torch.manual_seed(args.seed)
    target = modeling.CausalLM(make_shape(size["target"], vocab))
    draft = modeling.CausalLM(make_shape(size["draft"], vocab))
    return target, draft


def train_draft(args, size, draft, target, train_ids):
    """Distils draft from the bf16 target: KL to the target's distribution on windows of the
    training text and on the target's own greedy continuations of other windows. Returns the
    bf16 draft and the report's draft_s and draft_training."""
    steps = args.draft_steps or size["draft_steps"]
    real = training.Batches(train_ids, size["draft_batch"], size["seq"], args.seed + 2)
    generated = training.Generated(target, train_ids, size["gen_batch"], size["gen_prompt"],
                                   size["gen_tokens"], size["gen_chunk"], args.seed + 3)
    draft_s = training.distill_draft(draft, target, [("text", 1.0, real),
                                                     ("generated", 1.0, generated)],
                                     steps, size["draft_lr"], log)
    log(f"draft: {generated.sequences} greedy sequences generated in {generated.seconds:.0f} s")
    info = {"steps": steps, "text_windows_per_step": size["draft_batch"],
            "text_window_tokens": size["seq"], "generated_per_step": size["gen_batch"],
            "generated_prompt_tokens": size["gen_prompt"],
            "generated_greedy_tokens": size["gen_tokens"],
            "generated_sequences": generated.sequences, "generation_s": generated.seconds}
    return checkpoint.bf16_copy(draft), draft_s, info


def train_pair(args, size, tok, train_ids):
    target, draft = init_models(args, size, tok.size)
    log(f"target: {modeling.count_parameters(target)} parameters; "
        f"draft: {modeling.count_parameters(draft)}")
    steps = args.target_steps or size["target_steps"]
    batches = training.Batches(train_ids, size["batch"], size["seq"], args.seed + 1)
    target_s = training.train_target(target, batches, steps, size["target_lr"], AUX_LOSS_COEF,
                                     log)
    target = checkpoint.bf16_copy(target)
    draft, draft_s, info = train_draft(args, size, draft, target, train_ids)
    return target, draft, {"target_s": target_s, "draft_s": draft_s, "draft_training": info}


def load_tokenizer(model_dir):
    with open(os.path.join(model_dir, "tokenizer.json"), encoding="utf-8") as f:
        merges = json.load(f)["model"]["merges"]
    return bpe.Tokenizer([tuple(m.split(" ")) for m in merges])


def check_lines(held_out):
    lines = [line.strip() for _, text in held_out for line in text.split("\n")]
    return [line for line in lines if line][:CHECK_LINES]


def file_mb(path):
    return os.path.getsize(path) / 1e6


def evaluate(args, size, tok, target, draft, held_out):
    """Figures on all held-out documents and on the committed sample."""
    seq = size["seq"]
    experts = target.shape.experts
    with open(os.path.join(args.out, "heldout.txt"), encoding="utf-8") as f:
        sample = tok.encode(f.read())
    figures = {"held_out": training.evaluate(target, draft, token_stream(tok, held_out), seq,
                                             experts),
               "heldout_txt": training.evaluate(target, draft, sample, seq, experts)}
    for name, f in figures.items():
        loads = [f"{min(layer):.3f}-{max(layer):.3f}" for layer in f["expert_load_share"]]
        log(f"{name}: {f['tokens']} tokens, target perplexity {f['target_perplexity']:.2f}, "
            f"draft perplexity {f['draft_perplexity']:.2f}, draft top-1 agreement "
            f"{f['draft_top1_agreement']:.3f}; expert shares per layer (min-max) {loads}")
    return figures


def write_outputs(args, tok, target, draft, held_out):
    os.makedirs(args.out, exist_ok=True)
    checkpoint.write_model_dir(os.path.join(args.out, "target"), target, tok, AUX_LOSS_COEF)
    checkpoint.write_model_dir(os.path.join(args.out, "draft"), draft, tok)
    with open(os.path.join(args.out, "draft", "draft_settings.json"), "w") as f:
        json.dump({"attention_window": DRAFT_ATTENTION_WINDOW}, f)
        f.write("\n")
    with open(os.path.join(args.out, "heldout.txt"), "w", encoding="utf-8") as f:
        f.write(corpus.held_out_sample(held_out, HELD_OUT_SAMPLE_BYTES))
    with open(os.path.join(args.out, "NOTICE"), "w", encoding="utf-8") as f:
        f.write(corpus.notice())


def write_report(path, report):
    with open(path, "w") as f:
        json.dump(report, f, indent=1)
        f.write("\n")


def draft_only(args, size, train_docs, held_out):
    """Trains the draft again against the committed target (what a full run's target is: the
    same seed gives the same target) and rewrites --out/draft and the report's draft entries."""
    report_path = os.path.join(args.out, "training_report.json")
    with open(report_path) as f:
        old = json.load(f)
    if (old["seed"], old["size"]) != (args.seed, args.size):
        sys.exit(f"{report_path} is for seed {old['seed']} and size {old['size']}")
    tok = load_tokenizer(os.path.join(args.out, "target"))
    target = checkpoint.load_model_dir(os.path.join(args.out, "target"))
    train_ids = token_stream(tok, train_docs)
    if len(train_ids) != old["train_tokens"]:
        sys.exit(f"train text: {len(train_ids)} tokens, the report says {old['train_tokens']}")
    log(f"train text: {len(train_ids)} tokens; target loaded from {args.out}")
    _, draft = init_models(args, size, tok.size)
    draft, draft_s, info = train_draft(args, size, draft, target, train_ids)
    checkpoint.write_model_dir(os.path.join(args.out, "draft"), draft, tok)
    new = {"draft_s": draft_s, "draft_training": info,
           "total_training_s": old["total_training_s"] - old["draft_s"] + draft_s,
           "parameters": dict(old["parameters"], draft=modeling.count_parameters(draft)),
           "safetensors_mb": dict(old["safetensors_mb"],
                                  draft=file_mb(os.path.join(args.out, "draft",
                                                             "model.safetensors"))),
           "figures": evaluate(args, size, tok, target, draft, held_out)}
    # A full run's key order: draft_training right after draft_s.
    report = {}
    for key, value in old.items():
        if key != "draft_training":
            report[key] = new.get(key, value)
        if key == "draft_s":
            report["draft_training"] = info
    write_report(report_path, report)
    return tok, target, draft


def main():
    args = parse_args()
    torch.set_num_threads(args.threads)
    torch.use_deterministic_algorithms(True)
    size = SIZES[args.size]
    start = time.time()
    train_docs, held_out = corpus.load_documents()
    log(f"corpus: {len(train_docs)} train documents, {len(held_out)} held out "
        f"({sum(len(t.encode()) for _, t in train_docs)} and "
        f"{sum(len(t.encode()) for _, t in held_out)} bytes)")
    report = {"seed": args.seed, "threads": args.threads, "size": args.size}
    if args.check_only:
        tok = load_tokenizer(os.path.join(args.out, "target"))
        target = checkpoint.load_model_dir(os.path.join(args.out, "target"))
        draft = checkpoint.load_model_dir(os.path.join(args.out, "draft"))
    elif args.draft_only:
        tok, target, draft = draft_only(args, size, train_docs, held_out)
    else:
        tok = train_tokenizer(train_docs)
        report["tokenizer_s"] = time.time() - start
        train_ids = token_stream(tok, train_docs)
        log(f"train text: {len(train_ids)} tokens "
            f"({sum(len(t.encode()) for _, t in train_docs) / len(train_ids):.2f} bytes/token)")
        target, draft, times = train_pair(args, size, tok, train_ids)
        report.update(times, train_tokens=len(train_ids))
        write_outputs(args, tok, target, draft, held_out)
        report["total_training_s"] = time.time() - start
        report["parameters"] = {"target": modeling.count_parameters(target),
                                "draft": modeling.count_parameters(draft)}
        report["safetensors_mb"] = {n: file_mb(os.path.join(args.out, n, "model.safetensors"))
                                    for n in ("target", "draft")}
        report["figures"] = evaluate(args, size, tok, target, draft, held_out)
        report["eval_window_tokens"] = size["seq"]
        write_report(os.path.join(args.out, "training_report.json"), report)
    if args.check_with_brigade:
        check = brigade_check.check_pair(args.check_with_brigade, args.out,
                                         {"target": target, "draft": draft}, tok,
                                         check_lines(held_out), CHECK_PROMPTS, log)
        write_report(os.path.join(args.out, "check_report.json"), check)
    log(f"done in {(time.time() - start) / 60:.1f} min; wrote {args.out}")


if __name__ == "__main__":
    main()
