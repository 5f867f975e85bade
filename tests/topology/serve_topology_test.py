#!/usr/bin/env python3
"""One answer, whatever the topology: 50+ concurrent greedy completions through `brigade serve`
equal `brigade generate` for each prompt, with experts over 1, 2, 4 and 8 shards and 1 and 2
decode workers; a decode worker killed mid-stream loses and repeats nothing; prefix cache hits
over HTTP give generate's text and report their cached tokens; and `brigade serve --speculate 4`,
over the topology and over the engine, answers with plain decoding's text, with drafts by prompt
lookup and by a draft model (`--draft-model DIR`); and serve's --served-model-name, --max-queued
and --max-running take effect in both modes.

Usage: serve_topology_test.py BRIGADE_BIN WORKDIR [--quick] [--family F]
"""
import concurrent.futures
import json
import os
import shutil
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from brigade_server import brigade_server, make_small_model  # noqa: E402

PROMPTS = 52
MAX_TOKENS = 12


def prompt_ids(i):
    return [(i * 97 + t * 31) % 1900 + 40 for t in range(3 + (i * 7) % 30)]


def generate(brigade, model, ids, max_tokens):
    out = subprocess.run([brigade, "generate", "--model", model, "--prompt-ids",
                          ",".join(map(str, ids)), "--max-tokens", str(max_tokens),
                          "--temperature", "0", "--ignore-eos", "--json"],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def write_manifest(path, model, shards, decoders, slots_per_shard=0):
    with open(path, "w") as f:
        f.write(f"model: {model}\n"
                f"roles:\n"
                f"  prefill: {{count: 1}}\n"
                f"  decode: {{count: {decoders}, max_running: 16}}\n"
                f"  expert_shard: {{count: {shards}, slots_per_shard: {slots_per_shard}}}\n")


def completion(srv, ids):
    return srv.post("/v1/completions", {"model": "model", "prompt": ids, "max_tokens": MAX_TOKENS,
                                        "temperature": 0, "ignore_eos": True})


def check_topology(brigade, model, workdir, expected, shards, decoders):
    name = f"shards{shards}-decode{decoders}"
    manifest = os.path.join(workdir, name + ".yaml")
    write_manifest(manifest, model, shards, decoders)
    srv = brigade_server(brigade, manifest, os.path.join(workdir, name + ".log"))
    try:
        with concurrent.futures.ThreadPoolExecutor(max_workers=PROMPTS) as pool:
            answers = list(pool.map(lambda i: completion(srv, prompt_ids(i)), range(PROMPTS)))
    finally:
        srv.stop()
    bad = [i for i, a in enumerate(answers) if a["choices"][0]["text"] != expected[i]["text"]]
    for i in bad[:3]:
        print(f"  {name}: prompt {i}: got {answers[i]['choices'][0]['text']!r}, "
              f"generate gave {expected[i]['text']!r}")
    usage_ok = all(a["usage"]["completion_tokens"] == MAX_TOKENS for a in answers)
    print(f"{name:18s} {PROMPTS} concurrent prompts: "
          f"{'identical to generate' if not bad else f'{len(bad)} differ'}"
          f"{'' if usage_ok else ', wrong usage'}")
    return not bad and usage_ok


def check_kill(brigade, model, workdir):
    """decode-0 killed mid-stream (P=1 D=2): every stream completes with generate's text."""
    manifest = os.path.join(workdir, "kill.yaml")
    write_manifest(manifest, model, 4, 2)
    tokens = 48
    expected = [generate(brigade, model, prompt_ids(i), tokens)["text"] for i in range(8)]
    srv = brigade_server(brigade, manifest, os.path.join(workdir, "kill.log"))
    killed = []

    def kill_once():
        if not killed:
            killed.append(srv.post("/v1/admin/kill", {"actor": "decode-0"}))

    try:
        with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
            futures = [pool.submit(srv.stream, {"model": "model", "prompt": prompt_ids(i),
                                                "max_tokens": tokens, "temperature": 0,
                                                "ignore_eos": True},
                                   kill_once if i == 0 else None) for i in range(8)]
            texts = [f.result() for f in futures]
        entry = None
        for _ in range(100):
            actors = srv.get("/v1/actors")["actors"]
            entry = next(a for a in actors if a["name"] == "decode-0")
            if entry["alive"] and entry["generation"] == 2:
                break
            time.sleep(0.05)
    finally:
        srv.stop()
    ok = killed and all(t == e for t, e in zip(texts, expected))
    ok = ok and entry["generation"] == 2 and "kill" in (entry["death_cause"] or "")
    print(f"decode-0 killed mid-stream: "
          f"{'8 streams identical to generate, none repeated' if ok else 'FAILED'}; registry: "
          f"generation {entry['generation']}, death cause {entry['death_cause']}")
    if not ok:
        for t, e in zip(texts, expected):
            if t != e:
                print(f"  got {t!r}\n  expected {e!r}")
    return ok


def refused_param(srv, path, body):
    """The status and the param named by the error a POST is refused with (None, None if taken)."""
    try:
        srv.post(path, body)
        return None, None
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())["error"]["param"]


def wait_for_migration(srv, timeout_s=30):
    deadline = time.time() + timeout_s
    while srv.get("/v1/experts")["migration"] is not None and time.time() < deadline:
        time.sleep(0.05)


def check_replan(brigade, model, workdir, expected):
    """POST /v1/admin/replan: a body without a seed is a 400 naming it; a seed starts a migration
    whose new experts come from the shards that hold them; with "kill" the named shard dies as
    the migration starts, which rolls back; outputs stay those of generate throughout."""
    manifest = os.path.join(workdir, "replan.yaml")
    write_manifest(manifest, model, 4, 1, slots_per_shard=3)
    srv = brigade_server(brigade, manifest, os.path.join(workdir, "replan.log"))
    try:
        refused = [refused_param(srv, "/v1/admin/replan", {"seed": "x"}),
                   refused_param(srv, "/v1/admin/replan", {"seed": 6, "kill": 3}),
                   refused_param(srv, "/v1/admin/replan", {"seed": 6, "kill": "nobody"})]
        started = srv.post("/v1/admin/replan", {"seed": 5})
        wait_for_migration(srv)
        epoch = srv.get("/v1/experts")["epoch"]
        copied = sum(s["detail"]["experts_received"]["same_node"] for s in srv.get("/v1/status")
                     if s["role"] == "expert_shard")
        answers = [completion(srv, prompt_ids(i)) for i in range(4)]
        killed = srv.post("/v1/admin/replan", {"seed": 6, "kill": "expert_shard-1"})
        wait_for_migration(srv)
        after_kill = srv.get("/v1/experts")
        answers += [completion(srv, prompt_ids(i)) for i in range(4)]
    finally:
        srv.stop()
    same = all(a["choices"][0]["text"] == expected[i % 4]["text"] for i, a in enumerate(answers))
    refused_ok = refused == [(400, "seed"), (400, "kill"), (404, "kill")]
    rolled_back = (killed.get("killed") == "expert_shard-1" and after_kill["epoch"] == epoch
                   and after_kill["rebalances"]["rolled_back"] == 1)
    ok = (refused_ok and started["replan"] == "started" and epoch == 1 and copied > 0
          and rolled_back and same)
    print(f"admin replan: bad bodies refused {refused}; seed 5 adopted as epoch {epoch}, "
          f"{copied} experts copied from peer shards; seed 6 killing expert_shard-1 "
          f"{'rolled back' if rolled_back else 'NOT rolled back'} "
          f"(epoch {after_kill['epoch']}, {after_kill['rebalances']['rolled_back']} rolled back); "
          f"{'outputs identical to generate' if same else 'outputs DIFFER'}")
    return ok


def check_cache(brigade, model, workdir):
    """Prompts sharing a prefix, over HTTP with the prefix cache on: generate's text, usage that
    reports the hits, a 400 naming 'scenario' for an unknown one, and hit rates in /metrics."""
    manifest = os.path.join(workdir, "cache.yaml")
    with open(manifest, "w") as f:
        f.write(f"model: {model}\n"
                f"roles: {{prefill: {{count: 2}}, decode: {{count: 1}}, expert_shard: {{count: 2}}}}\n"
                f"kv_cache: {{enabled: true, host_bytes: 4MiB, scenarios: {{batch: 1h}}}}\n")
    shared = [(t * 37) % 1900 + 40 for t in range(48)]
    prompts = [shared + [7 + i, 9 + i] for i in range(4)]
    expected = [generate(brigade, model, p, MAX_TOKENS)["text"] for p in prompts]
    srv = brigade_server(brigade, manifest, os.path.join(workdir, "cache.log"))
    ok = True
    try:
        answers = []
        for i, p in enumerate(prompts):
            answers.append(srv.post("/v1/completions", {
                "model": "model", "prompt": p, "max_tokens": MAX_TOKENS, "temperature": 0,
                "ignore_eos": True, "scenario": ["chat", "agent", "batch", "chat"][i]}))
        for a, e in zip(answers, expected):
            u = a["usage"]
            ok = ok and a["choices"][0]["text"] == e
            ok = ok and u["prompt_cache_hit_tokens"] == u["prompt_tokens_details"]["cached_tokens"]
            ok = ok and u["prompt_cache_hit_tokens"] + u["prompt_cache_miss_tokens"] == u["prompt_tokens"]
        hits = [a["usage"]["prompt_tokens_details"]["cached_tokens"] for a in answers]
        ok = ok and hits[0] == 0 and sum(hits[1:]) > 0
        # An answer a stop string ends reports its hits too (it ends before the service's usage).
        stop = expected[0][len(expected[0]) // 2:][:2]
        stopped = srv.post("/v1/completions", {
            "model": "model", "prompt": prompts[0], "max_tokens": MAX_TOKENS, "temperature": 0,
            "ignore_eos": True, "stop": [stop]})
        stopped_hits = stopped["usage"]["prompt_tokens_details"]["cached_tokens"]
        stop_ok = (len(stop) == 2 and stopped["choices"][0]["finish_reason"] == "stop" and
                   stopped_hits > 0)
        if not stop_ok:
            print(f"  stop string {stop!r}: finish {stopped['choices'][0]['finish_reason']}, "
                  f"cached tokens {stopped_hits} (want stop, and more than 0)")
        ok = ok and stop_ok
        try:
            srv.post("/v1/completions", {"model": "model", "prompt": shared, "max_tokens": 2,
                                         "scenario": "nightly"})
            ok = False
        except urllib.error.HTTPError as e:
            body = json.loads(e.read())
            ok = ok and e.code == 400 and body["error"]["param"] == "scenario"
        with urllib.request.urlopen(srv.url + "/metrics", timeout=30) as r:
            metrics = r.read().decode()
        ok = ok and 'brigade_prefix_cache_hit_rate{tier="pool"}' in metrics
        ok = ok and 'brigade_prefix_cache_scenario_hit_rate{scenario="batch"}' in metrics
    finally:
        srv.stop()
    print(f"prefix cache over HTTP: cached tokens {hits}: {'ok' if ok else 'FAILED'}")
    return ok


def repetitive_ids(i):
    phrase = [(i * 53 + t * 29) % 1900 + 40 for t in range(5 + i % 4)]
    return phrase * 4


def check_speculation(brigade, model, workdir):
    """Speculative decoding over HTTP: the topology and the engine give generate's plain text, and
    /metrics shows drafts both kept and thrown away."""
    tokens, count = 32, 8
    expected = [generate(brigade, model, repetitive_ids(i), tokens)["text"] for i in range(count)]
    manifest = os.path.join(workdir, "speculation.yaml")
    write_manifest(manifest, model, 4, 2)
    ok = True
    for mode, extra in (("topology", []), ("engine", ["--engine"])):
        srv = brigade_server(brigade, manifest, os.path.join(workdir, f"speculation-{mode}.log"),
                             extra_args=["--speculate", "4"] + extra)
        try:
            with concurrent.futures.ThreadPoolExecutor(max_workers=count) as pool:
                answers = list(pool.map(
                    lambda i: srv.post("/v1/completions", {
                        "model": "model", "prompt": repetitive_ids(i), "max_tokens": tokens,
                        "temperature": 0, "ignore_eos": True}), range(count)))
            drafted = srv.metric("brigade_speculative_draft_tokens_total")
            accepted = srv.metric("brigade_speculative_accepted_tokens_total")
        finally:
            srv.stop()
        bad = [i for i, a in enumerate(answers) if a["choices"][0]["text"] != expected[i]]
        for i in bad[:3]:
            print(f"  speculation ({mode}): prompt {i}: got {answers[i]['choices'][0]['text']!r}, "
                  f"generate gave {expected[i]!r}")
        exercised = bool(accepted) and drafted is not None and drafted > accepted
        print(f"speculation ({mode}): {count} prompts "
              f"{'identical to generate' if not bad else f'{len(bad)} differ'}; "
              f"{accepted} of {drafted} drafts accepted"
              f"{'' if exercised else ' (drafts must be both kept and rejected)'}")
        ok = ok and not bad and exercised
    return ok


def check_default_pair_head(brigade, workdir):
    """The committed pair (models/default) with its confidence head (draft/confidence_head.json),
    through the topology's decode workers and through the engine: plain decoding's text, with
    drafts fed and some kept."""
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "models",
                        "default")
    target, draft = os.path.join(root, "target"), os.path.join(root, "draft")
    if not os.path.exists(os.path.join(draft, "confidence_head.json")):
        print("default pair with its confidence head: MISSING models/default/draft/"
              "confidence_head.json")
        return False
    with open(os.path.join(root, "heldout.txt"), encoding="utf-8") as f:
        words = f.read().split()
    prompts = [" ".join(words[200 * i: 200 * i + 24]) for i in range(6)]
    tokens = 24
    expected = []
    for p in prompts:
        out = subprocess.run([brigade, "generate", "--model", target, "--prompt", p,
                              "--max-tokens", str(tokens), "--temperature", "0", "--ignore-eos",
                              "--json"], check=True, capture_output=True, text=True).stdout
        expected.append(json.loads(out.strip().splitlines()[-1])["text"])
    manifest = os.path.join(workdir, "default-pair.yaml")
    write_manifest(manifest, target, 4, 2)
    ok = True
    for mode, extra in (("topology", []), ("engine", ["--engine"])):
        srv = brigade_server(brigade, manifest, os.path.join(workdir, f"pair-{mode}.log"),
                             extra_args=["--draft-model", draft] + extra)
        try:
            answers = [srv.post("/v1/completions", {
                "model": "target", "prompt": p, "max_tokens": tokens, "temperature": 0,
                "ignore_eos": True}) for p in prompts]
            drafted = srv.metric("brigade_speculative_draft_tokens_total")
            accepted = srv.metric("brigade_speculative_accepted_tokens_total")
        finally:
            srv.stop()
        bad = [i for i, a in enumerate(answers) if a["choices"][0]["text"] != expected[i]]
        exercised = bool(drafted) and bool(accepted)
        print(f"default pair with its confidence head ({mode}): {len(prompts)} prompts "
              f"{'identical to generate' if not bad else f'{len(bad)} differ'}; {accepted} of "
              f"{drafted} drafts kept{'' if exercised else ' (drafts must be fed and kept)'}")
        ok = ok and not bad and exercised
    return ok


def check_draft_model(brigade, model, workdir, family):
    """`--draft-model DIR` over HTTP, through the topology's two decode workers and through the
    engine, and in `brigade generate`: plain decoding's text, with draft tokens fed (a random draft
    rarely agrees with its target: tests/model and tests/actors cover kept drafts)."""
    if family != "qwen3_moe":
        print(f"draft model: skipped for {family} (no dense family shares its tokenizer)")
        return True
    draft = os.path.join(workdir, "draft")
    subprocess.run([brigade, "make-model", "--family", "qwen3", "--out", draft, "--hidden", "64",
                    "--heads", "4", "--kv-heads", "2", "--head-dim", "16", "--layers", "1",
                    "--seed", "4"], check=True, capture_output=True)
    tokens, count = 24, 8
    expected = [generate(brigade, model, repetitive_ids(i), tokens)["text"] for i in range(count)]
    manifest = os.path.join(workdir, "draft-model.yaml")
    write_manifest(manifest, model, 4, 2)
    ok = True
    for mode, extra in (("topology", []), ("engine", ["--engine"])):
        srv = brigade_server(brigade, manifest, os.path.join(workdir, f"draft-{mode}.log"),
                             extra_args=["--speculate", "3", "--draft-model", draft] + extra)
        try:
            with concurrent.futures.ThreadPoolExecutor(max_workers=count) as pool:
                answers = list(pool.map(
                    lambda i: srv.post("/v1/completions", {
                        "model": "model", "prompt": repetitive_ids(i), "max_tokens": tokens,
                        "temperature": 0, "ignore_eos": True}), range(count)))
            drafted = srv.metric("brigade_speculative_draft_tokens_total")
            first = srv.metric('brigade_speculative_draft_tokens_by_position_total{position="0"}')
        finally:
            srv.stop()
        bad = [i for i, a in enumerate(answers) if a["choices"][0]["text"] != expected[i]]
        fed = bool(drafted) and bool(first)
        print(f"draft model ({mode}): {count} prompts "
              f"{'identical to generate' if not bad else f'{len(bad)} differ'}; "
              f"{drafted} drafts fed{'' if fed else ' (drafts must be fed)'}")
        ok = ok and not bad and fed
    ids = repetitive_ids(0)
    drafted = subprocess.run([brigade, "generate", "--model", model, "--prompt-ids",
                              ",".join(map(str, ids)), "--max-tokens", str(tokens),
                              "--temperature", "0", "--ignore-eos", "--json", "--draft-model",
                              draft], check=True, capture_output=True, text=True).stdout
    reply = json.loads(drafted.strip().splitlines()[-1])
    same = reply["text"] == expected[0] and reply["speculation"]["draft"] == "model"
    print(f"draft model (generate): {'identical to plain' if same else 'DIFFERS'}, "
          f"{reply['speculation']['drafted_tokens']} drafts fed")
    return ok and same and reply["speculation"]["drafted_tokens"] > 0


def check_serve_flags(brigade, model, workdir):
    """`--served-model-name` names the model and `--max-queued`/`--max-running` bound admission,
    over the topology and over the engine: with one running and one waiting, eight requests sent
    at once get both answers and 429s."""
    manifest = os.path.join(workdir, "flags.yaml")
    write_manifest(manifest, model, 2, 1)
    ok = True
    for mode, extra in (("topology", []), ("engine", ["--engine"])):
        srv = brigade_server(brigade, manifest, os.path.join(workdir, f"flags-{mode}.log"),
                             extra_args=["--served-model-name", "my-moe", "--max-queued", "1",
                                         "--max-running", "1"] + extra)
        start = threading.Barrier(8)

        def one(i):
            start.wait()
            try:
                srv.post("/v1/completions", {"model": "my-moe", "prompt": prompt_ids(i),
                                             "max_tokens": 200, "ignore_eos": True})
                return 200
            except urllib.error.HTTPError as e:
                return e.code
        try:
            names = [m["id"] for m in srv.get("/v1/models")["data"]]
            with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
                codes = sorted(pool.map(one, range(8)))
        finally:
            srv.stop()
        good = names == ["my-moe"] and 200 in codes and 429 in codes and set(codes) <= {200, 429}
        print(f"serve flags ({mode}): models {names}, statuses {codes}: "
              f"{'ok' if good else 'FAILED (want my-moe, and both 200 and 429)'}")
        ok = ok and good
    return ok


def main():
    brigade, workdir = sys.argv[1], sys.argv[2]
    quick = "--quick" in sys.argv
    family = sys.argv[sys.argv.index("--family") + 1] if "--family" in sys.argv else "qwen3_moe"
    shutil.rmtree(workdir, ignore_errors=True)
    os.makedirs(workdir)
    model = os.path.join(workdir, "model")
    make_small_model(brigade, model, family)
    print(f"model: {family}")
    expected = [generate(brigade, model, prompt_ids(i), MAX_TOKENS) for i in range(PROMPTS)]
    shapes = [(1, 1), (2, 2)] if quick else [(s, d) for s in (1, 2, 4, 8) for d in (1, 2)]
    ok = all([check_topology(brigade, model, workdir, expected, s, d) for s, d in shapes])
    ok = check_kill(brigade, model, workdir) and ok
    ok = check_replan(brigade, model, workdir, expected) and ok
    ok = check_cache(brigade, model, workdir) and ok
    ok = check_speculation(brigade, model, workdir) and ok
    ok = check_draft_model(brigade, model, workdir, family) and ok
    if family == "qwen3_moe":
        ok = check_default_pair_head(brigade, workdir) and ok
    ok = check_serve_flags(brigade, model, workdir) and ok
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
