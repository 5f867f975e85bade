#!/usr/bin/env python3
"""Weights replaced in place under the same path never get the old weights' KV from the SSD tier.

`brigade serve` with a small host tier and an SSD tier answers a prompt, then enough other
prompts that the first one's blocks are demoted to SSD, and stops. Then, each time restarted on
the same SSD directory:

1. weights unchanged (the control): the prompt is an SSD hit, with the same model id, and the
   start takes the weights' digest from the digest cache;
2. another checkpoint's weights (same shape, another seed) written over model.safetensors in
   place: the prompt finds nothing cached, and its answer (tokens and log-probabilities) is
   `brigade generate`'s on the new weights, that is, recomputed;
3. the first weights written back in place with the file's size, mtime and inode kept (the one
   change the digest cache cannot see): that start keeps the stale id, its background check logs
   the error, and the start after it names the first weights again (and finds their blocks).

Usage: weights_replaced_test.py BRIGADE_BIN WORKDIR
"""
import glob
import json
import math
import os
import re
import shutil
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
from brigade_server import brigade_server  # noqa: E402

BLOCK_TOKENS = 16
# 2 layers x (keys, values) x 16 tokens x 4 heads x 128 x f32: 128 KiB a block, so that the
# smallest host tier allowed beside an SSD tier (1 MiB) holds only 8 blocks.
MODEL_ARGS = ["--family", "qwen3_moe", "--layers", "2", "--hidden", "64", "--heads", "4",
              "--kv-heads", "4", "--head-dim", "128", "--experts", "8", "--top-k", "2",
              "--moe-inter", "32"]
PROMPT = [(i * 37) % 1800 + 40 for i in range(10 * BLOCK_TOKENS + 5)]  # 10 full blocks
FILLERS = [[(i * 53 + k * 101) % 1800 + 41 for i in range(12 * BLOCK_TOKENS)] for k in range(2)]
MAX_TOKENS = 6
TOLERANCE = 1e-4
STALE_ERROR = "the weights changed without their size, mtime or inode changing"

failures = []


def check(name, ok, detail=""):
    print(("ok   " if ok else "FAIL ") + name + ("" if ok else f": {detail}"), flush=True)
    if not ok:
        failures.append(name)


def make_model(brigade, out_dir, seed):
    subprocess.run([brigade, "make-model", "--out", out_dir, "--seed", str(seed)] + MODEL_ARGS,
                   check=True, capture_output=True)


def age(path):
    """An hour back: older than the digest cache's window for files written just before."""
    t = time.time() - 3600
    os.utime(path, (t, t))


def overwrite(dst_path, src_path, keep_mtime=False):
    """Writes src's bytes over dst in place (same inode); with keep_mtime, restores dst's times."""
    before = os.stat(dst_path)
    with open(src_path, "rb") as src, open(dst_path, "r+b") as dst:
        shutil.copyfileobj(src, dst)
        dst.truncate()
    if keep_mtime:
        os.utime(dst_path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = os.stat(dst_path)
    assert after.st_ino == before.st_ino and after.st_size == before.st_size


class answer:
    """`brigade generate`'s greedy answer to PROMPT: ids, text, and the log-softmax of each
    generated token's logits row."""

    def __init__(self, brigade, model, workdir):
        npy = os.path.join(workdir, "logits.npy")
        out = subprocess.run([brigade, "generate", "--model", model, "--prompt-ids",
                              ",".join(map(str, PROMPT)), "--max-tokens", str(MAX_TOKENS),
                              "--temperature", "0", "--ignore-eos", "--json", "--logits-out",
                              npy], check=True, capture_output=True, text=True).stdout
        j = json.loads(out.strip().splitlines()[-1])
        self.ids, self.text = j["ids"], j["text"]
        rows = np.load(npy).astype(np.float64)
        self.logprobs = [row[t] - (row.max() + math.log(np.exp(row - row.max()).sum()))
                         for row, t in zip(rows, self.ids)]

    def check_served(self, label, r):
        """The served completion `r` (with logprobs) is this answer."""
        choice = r["choices"][0]
        got = choice["logprobs"]["token_logprobs"]
        worst = max(abs(a - b) for a, b in zip(got, self.logprobs))
        check(f"{label}: the log-probabilities are generate's",
              len(got) == MAX_TOKENS and worst <= TOLERANCE, f"worst difference {worst}")
        check(f"{label}: the text is generate's", choice["text"] == self.text,
              (choice["text"], self.text))


def complete(srv, prompt, logprobs=False):
    body = {"model": srv.get("/v1/models")["data"][0]["id"], "prompt": prompt,
            "max_tokens": MAX_TOKENS, "temperature": 0, "ignore_eos": True}
    if logprobs:
        body["logprobs"] = 1
    return srv.post("/v1/completions", body)


def store_detail(srv):
    return [r for r in srv.get("/v1/status") if r["name"] == "kv_store-0"][0]["detail"]


def wait_store_idle(srv):
    """Until the KV store has taken every demotion the prefill workers sent, and written it."""
    for _ in range(600):
        roles = srv.get("/v1/status")
        store = [r for r in roles if r["name"] == "kv_store-0"][0]["detail"]
        sent = sum(r["detail"]["cache"].get("demotion_batches", 0) for r in roles
                   if r["role"] == "prefill")
        if store.get("open") and store.get("demotion_batches") == sent and \
                store.get("queue_depth") == 0 and store.get("pending_demotions") == 0:
            return store
        time.sleep(0.05)
    raise AssertionError("the KV store never went idle")


def model_id(log_path):
    """The KV cache model id the server logged, and how many weights digests came from the
    digest cache."""
    with open(log_path) as f:
        m = re.search(r"KV cache model id (content:[0-9a-f]{32}) \(.*?(\d+) weights digests? from",
                      f.read())
    return (m.group(1), int(m.group(2))) if m else (None, None)


def cached_tokens(r):
    return r["usage"]["prompt_tokens_details"]["cached_tokens"]


def fill_ssd(brigade, manifest, workdir, ssd):
    """Start 1: the prompt, then fillers that push its blocks out of host memory onto SSD."""
    log = os.path.join(workdir, "serve-1.log")
    srv = brigade_server(brigade, manifest, log)
    try:
        r = complete(srv, PROMPT)
        check("first start: the prompt is computed", cached_tokens(r) == 0, r["usage"])
        for filler in FILLERS:
            complete(srv, filler)
        store = wait_store_idle(srv)
        check("first start: blocks were demoted to SSD", store["ssd"]["blocks"] >= 10,
              store["ssd"])
    finally:
        srv.stop()
    check("first start: block files on SSD",
          len(glob.glob(os.path.join(ssd, "*", "*.kvb"))) >= 10, os.listdir(ssd))
    first_id, _ = model_id(log)
    check("first start: the KV cache is named by the content", first_id is not None,
          "no model id in " + log)
    return first_id


def restart_and_ask(brigade, manifest, log, want, label):
    """A start that answers the prompt; returns its completion and the KV store's detail."""
    srv = brigade_server(brigade, manifest, log)
    try:
        r = complete(srv, PROMPT, logprobs=True)
        store = store_detail(srv)
        want.check_served(label, r)
    finally:
        srv.stop()
    return r, store


def wait_for_log(path, text, timeout_s=60):
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        with open(path) as f:
            if text in f.read():
                return True
        time.sleep(0.1)
    return False


def rewrite_keeping_mtime(brigade, manifest, workdir, model, first, first_id, stale_id):
    """Start 4 and 5: the first weights back, written with size, mtime and inode kept."""
    overwrite(os.path.join(model, "model.safetensors"),
              os.path.join(workdir, "first-weights", "model.safetensors"), keep_mtime=True)
    log = os.path.join(workdir, "serve-4.log")
    srv = brigade_server(brigade, manifest, log)
    try:
        found = wait_for_log(log, STALE_ERROR)
    finally:
        srv.stop()
    label = "rewritten keeping size, mtime and inode"
    check(f"{label}: that start trusts the digest cache (the documented limit)",
          model_id(log) == (stale_id, 1), (model_id(log), stale_id))
    check(f"{label}: its background check logs the error", found, "see " + log)
    log = os.path.join(workdir, "serve-5.log")
    r, store = restart_and_ask(brigade, manifest, log, first, f"{label}, next start")
    check(f"{label}, next start: the first weights' model id again",
          model_id(log)[0] == first_id, (model_id(log), first_id))
    check(f"{label}, next start: their blocks are found on SSD again",
          cached_tokens(r) >= BLOCK_TOKENS and store["lookup_ssd_hits"] > 0, r["usage"])


def main():
    brigade, workdir = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    shutil.rmtree(workdir, ignore_errors=True)
    os.makedirs(workdir)
    # The digest cache of this test's servers, apart from the user's.
    os.environ["BRIGADE_CACHE_DIR"] = os.path.join(workdir, "digest-cache")
    model = os.path.join(workdir, "model")
    for directory, seed in [(model, 3), ("first-weights", 3), ("other-weights", 4)]:
        make_model(brigade, os.path.join(workdir, directory), seed)
    age(os.path.join(model, "model.safetensors"))
    ssd = os.path.join(workdir, "ssd")
    os.makedirs(ssd)
    manifest = os.path.join(workdir, "manifest.yaml")
    with open(manifest, "w") as f:
        f.write(f"model: {model}\n"
                f"roles: {{prefill: {{count: 1}}, decode: {{count: 1}}}}\n"
                f"kv_cache: {{pool_bytes: 1, host_bytes: 1MiB, ssd_bytes: 64MiB, "
                f"ssd_dir: {ssd}}}\n")
    first = answer(brigade, model, workdir)
    other = answer(brigade, os.path.join(workdir, "other-weights"), workdir)
    check("the two checkpoints answer the prompt differently", first.ids != other.ids,
          (first.ids, other.ids))

    first_id = fill_ssd(brigade, manifest, workdir, ssd)

    label = "restart, same weights"
    log = os.path.join(workdir, "serve-2.log")
    r, store = restart_and_ask(brigade, manifest, log, first, label)
    check(f"{label}: the prompt hits the SSD tier",
          cached_tokens(r) >= BLOCK_TOKENS and store["lookup_ssd_hits"] > 0, (r["usage"], store))
    check(f"{label}: the same model id, the weights digest from the digest cache",
          model_id(log) == (first_id, 1), (model_id(log), first_id))

    label = "weights replaced in place"
    overwrite(os.path.join(model, "model.safetensors"),
              os.path.join(workdir, "other-weights", "model.safetensors"))
    # An hour back, so that this start caches the new digest (for start 4).
    age(os.path.join(model, "model.safetensors"))
    log = os.path.join(workdir, "serve-3.log")
    r, store = restart_and_ask(brigade, manifest, log, other, label)
    check(f"{label}: no cached tokens, no hit in any tier", cached_tokens(r) == 0 and
          store["lookup_ssd_hits"] == 0 and store["lookup_host_hits"] == 0, (r["usage"], store))
    check(f"{label}: the old blocks are still on SSD, unused", store["ssd"]["blocks"] >= 10,
          store["ssd"])
    other_id, from_cache = model_id(log)
    check(f"{label}: another model id, the weights hashed again",
          other_id not in (None, first_id) and from_cache == 0, (other_id, from_cache, first_id))

    rewrite_keeping_mtime(brigade, manifest, workdir, model, first, first_id, other_id)

    if failures:
        print(f"{len(failures)} check(s) failed; logs in {workdir}")
        return 1
    print("all checks passed")
    shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
