#!/usr/bin/python3
# make_scripted_model.py: a tiny real qwen3_moe checkpoint whose greedy reply to any chat prompt
# is a fixed list of text pieces, then <|im_end|>.
#
# Usage: make_scripted_model.py [--verify] BRIGADE_BINARY OUT_DIR PIECE...
#
# Construction (a bigram model on top of a checkpoint from `brigade make-model`, float32):
#  - each PIECE becomes a non-special added token (normalized false) with a new id, so that it is
#    one token; config vocab_size and the embed_tokens / lm_head rows grow to match (untied);
#  - every attention o_proj and every down_proj (experts, shared expert, dense MLP) is zeroed, so
#    no block writes to the residual stream: final hidden = RMSNorm(embedding of the last token);
#  - each chain token gets its own hidden dim d: dim 0 for every ordinary token (the prompt's last
#    token, "\n" of "<|im_start|>assistant\n", among them), dim i+1 for piece i; embeddings become
#    one-hot rows, the final norm weight ones; the lm_head columns of those dims are zeroed, and
#    the successor's row gets 50 at the predecessor's dim: ordinary -> piece0 -> ... -> last
#    piece -> <|im_end|> (eos, so generation stops). All other logits are 0 (the winner's is 400).
#  - --verify starts `brigade serve --engine` on a free port, tokenizes a chat prompt, posts
#    /v1/chat/completions with temperature 0 and checks content == "".join(PIECES).
# Pieces must be distinct, non-empty, and no existing added token ("<|im_end|>", ...).
import json
import os
import re
import struct
import subprocess
import sys
import time
import urllib.error
import urllib.request

import numpy as np

DTYPES = {"F32": np.float32, "F16": np.float16, "BF16": np.uint16}


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    meta = header.pop("__metadata__", None)
    tensors = {}
    for name, h in header.items():
        begin, end = h["data_offsets"]
        a = np.frombuffer(data[begin:end], dtype=DTYPES[h["dtype"]]).reshape(h["shape"])
        if h["dtype"] == "BF16":
            a = (a.astype(np.uint32) << 16).view(np.float32)
        tensors[name] = (h["dtype"], a.astype(np.float32))
    return meta, tensors


def write_safetensors(path, meta, tensors):
    header, blobs, offset = {}, [], 0
    if meta is not None:
        header["__metadata__"] = meta
    for name in sorted(tensors):
        dtype, a = tensors[name]
        if dtype == "BF16":
            u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
            raw = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype("<u2").tobytes()  # round to even
        else:
            raw = np.ascontiguousarray(a, dtype=np.dtype(DTYPES[dtype]).newbyteorder("<")).tobytes()
        header[name] = {"dtype": dtype, "shape": list(a.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for raw in blobs:
            f.write(raw)


def build(brigade, out, pieces):
    if not pieces or any(p == "" for p in pieces) or len(set(pieces)) != len(pieces):
        sys.exit("pieces must be non-empty and distinct")
    hidden = max(64, (len(pieces) + 8 + 15) // 16 * 16)
    subprocess.run([brigade, "make-model", "--family", "qwen3_moe", "--out", out,
                    "--layers", "2", "--hidden", str(hidden), "--heads", "2", "--kv-heads", "1",
                    "--head-dim", "32", "--experts", "4", "--top-k", "2", "--moe-inter", "32",
                    "--vocab", "512", "--dtype", "float32", "--seed", "0"],
                   check=True, stdout=subprocess.DEVNULL)
    cfg_path, tok_path = os.path.join(out, "config.json"), os.path.join(out, "tokenizer.json")
    st_path = os.path.join(out, "model.safetensors")
    with open(cfg_path) as f:
        cfg = json.load(f)
    with open(tok_path, encoding="utf-8") as f:
        tok = json.load(f)

    added = {t["content"]: t["id"] for t in tok["added_tokens"]}
    if any(p in added for p in pieces):
        sys.exit("a piece is already an added token")
    eos = added["<|im_end|>"]
    old_vocab = cfg["vocab_size"]
    piece_ids = list(range(old_vocab, old_vocab + len(pieces)))
    for p, i in zip(pieces, piece_ids):
        tok["added_tokens"].append({"id": i, "content": p, "single_word": False, "lstrip": False,
                                    "rstrip": False, "normalized": False, "special": False})
    vocab = old_vocab + len(pieces)
    cfg["vocab_size"] = vocab
    cfg["tie_word_embeddings"] = False

    meta, t = read_safetensors(st_path)
    emb_dtype, emb = t["model.embed_tokens.weight"]
    head_dtype, head = t.get("lm_head.weight", (emb_dtype, emb))
    emb = np.concatenate([emb, np.zeros((len(pieces), hidden), np.float32)])
    head = np.concatenate([head, np.zeros((len(pieces), hidden), np.float32)])
    for name, (dtype, a) in t.items():
        if re.search(r"\.(o_proj|down_proj)\.(weight|bias)$", name):
            t[name] = (dtype, np.zeros_like(a))
    t["model.norm.weight"] = (t["model.norm.weight"][0], np.ones(hidden, np.float32))

    chain = piece_ids + [eos]  # chain[k] follows dim k
    n_dims = len(pieces) + 1
    emb[:, :] = 0.0
    emb[:, 0] = 1.0  # every ordinary token predicts piece 0
    for k, tid in enumerate(piece_ids):
        emb[tid, :] = 0.0
        emb[tid, k + 1] = 1.0
    emb[eos, :] = 0.0
    emb[eos, n_dims] = 1.0  # a dim nothing reads: after eos every logit is 0
    head[:, :n_dims + 1] = 0.0
    for k, tid in enumerate(chain):
        head[tid, k] = 50.0
    t["model.embed_tokens.weight"] = (emb_dtype, emb)
    t["lm_head.weight"] = (head_dtype, head)
    write_safetensors(st_path, meta, t)

    with open(cfg_path, "w") as f:
        json.dump(cfg, f, indent=2)
    with open(tok_path, "w", encoding="utf-8") as f:
        json.dump(tok, f, ensure_ascii=False)
    return piece_ids, eos


def post(base, path, body):
    req = urllib.request.Request(base + path, json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return json.loads(r.read())
    except urllib.error.HTTPError as e:
        sys.exit(f"POST {path}: HTTP {e.code}: {e.read().decode(errors='replace')}")


def verify(brigade, out, pieces, piece_ids, eos):
    proc = subprocess.Popen([brigade, "serve", "--engine", "--model", out,
                             "--listen", "127.0.0.1:0", "--served-model-name", "scripted"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        base = None
        deadline = time.time() + 60
        while base is None and time.time() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            m = re.search(r"at (http://\S+)", line)
            if m:
                base = m.group(1)
        if base is None:
            sys.exit("brigade serve did not report its address")
        messages = [{"role": "system", "content": "You are helpful."},
                    {"role": "user", "content": "What is the weather in Paris?"}]
        ids = post(base, "/tokenize", {"messages": messages})["tokens"]
        nl = post(base, "/tokenize", {"prompt": "\n"})["tokens"]
        each = [post(base, "/tokenize", {"prompt": p})["tokens"] for p in pieces]
        print(f"prompt ends with {ids[-3:]}; '\\n' = {nl}; pieces = {piece_ids}; eos = {eos}", flush=True)
        if each != [[i] for i in piece_ids]:
            sys.exit(f"pieces do not tokenize to one token each: {each}")
        reply = post(base, "/v1/chat/completions",
                     {"model": "scripted", "messages": messages, "temperature": 0, "max_tokens": len(pieces) + 8})
        choice = reply["choices"][0]
        content = choice["message"]["content"]
        print("content:", json.dumps(content))
        print("finish_reason:", choice["finish_reason"], "usage:", json.dumps(reply.get("usage")))
        if content != "".join(pieces) or choice["finish_reason"] != "stop":
            sys.exit("verify FAILED")
        print("verify OK")
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def main():
    args = sys.argv[1:]
    do_verify = "--verify" in args
    args = [a for a in args if a != "--verify"]
    if len(args) < 3:
        sys.exit("usage: make_scripted_model.py [--verify] BRIGADE_BINARY OUT_DIR PIECE...")
    brigade, out, pieces = args[0], args[1], args[2:]
    piece_ids, eos = build(brigade, out, pieces)
    print(f"wrote {out}: {len(pieces)} pieces, ids {piece_ids[0]}..{piece_ids[-1]}, eos {eos}")
    if do_verify:
        verify(brigade, out, pieces, piece_ids, eos)


if __name__ == "__main__":
    main()
