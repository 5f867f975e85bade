#!/usr/bin/env python3
"""Multi-node brigade: three `brigade node` processes and a coordinator (`brigade serve MANIFEST`).

- outputs identical to `brigade generate` for concurrent greedy prompts, with expert shards on
  every node and prefill and decode on different nodes;
- a migration to another expert layout copies the new experts from the shards that hold them,
  over the data plane between nodes, and reads none from a checkpoint; outputs stay identical;
- kill -9 of a node holding expert shards, and of the node holding the decode worker, mid-stream:
  every stream completes with the same text; the registry shows who died with the node and why;
  over loopback the first kill also lands mid-migration, which rolls back to the layout before;
- a node started with another join secret is refused and gets nothing spawned;
- a node whose CPU kernels compute in another numerics class is refused, naming both;
- `brigade deploy --dry-run` prints the placement node by node;
- serve --speculate 4 drafts by prompt lookup on the decode worker's node, and serve --draft-model
  DIR with a draft model the node loads from its own disk; the text stays generate's;
- with --netns, the nodes run in Linux network namespaces joined by veth pairs to a bridge.

Usage: cluster_test.py BRIGADE_BIN WORKDIR [--netns | --shm]

--shm runs the data plane over shared memory (UCX_TLS=posix,sysv,cma,self), where UCX cannot
detect a dead peer itself, and stops a node with SIGSTOP (a hung node) instead of killing it.
"""
import concurrent.futures
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from brigade_server import brigade_server, make_small_model  # noqa: E402

PROMPTS = 24
TOKENS = 12
COPY_INTERVAL_MS = 200


def prompt_ids(i):
    return [(i * 89 + t * 37) % 1900 + 40 for t in range(4 + (i * 5) % 24)]


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw)


class node:
    def __init__(self, brigade, name, host, secret_file, log, netns=None, env=None):
        cmd = [brigade, "node", "--listen", f"{host}:0", "--join-secret-file", secret_file,
               "--name", name]
        if netns:
            cmd = ["ip", "netns", "exec", netns] + cmd
        self.name = name
        self.log = open(log, "w")
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self.log, text=True,
                                     env=None if env is None else {**os.environ, **env})
        line = self.proc.stdout.readline()
        m = re.search(r"listening on (\S+):(\d+) \(pid (\d+)\)", line)
        if not m:
            raise SystemExit(f"node {name} did not start: {line!r}; see {log}")
        self.address = f"{m.group(1)}:{m.group(2)}"
        self.pid = int(m.group(3))

    def kill(self, sig=signal.SIGKILL):
        os.kill(self.pid, sig)

    def stop(self):
        if self.proc.poll() is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(timeout=10)
        self.log.close()


def generate(brigade, model, ids, tokens):
    out = run([brigade, "generate", "--model", model, "--prompt-ids", ",".join(map(str, ids)),
               "--max-tokens", str(tokens), "--temperature", "0", "--ignore-eos", "--json"])
    return json.loads(out.stdout.strip().splitlines()[-1])["text"]


DEFAULT_EPLB = f"{{copy_interval_ms: {COPY_INTERVAL_MS}, sample_interval_steps: 4}}"


def write_manifest(path, model, secret, nodes, roles, tls, devices, eplb=DEFAULT_EPLB):
    with open(path, "w") as f:
        f.write(f"model: {model}\njoin_secret_file: {secret}\n"
                f"transport: {{tls: '{tls}'{', net_devices: ' + devices if devices else ''}}}\n"
                f"restart: {{max_restarts: 5, window_s: 60, backoff_ms: 20}}\n"
                # The prefill pool keeps one cached block: the rest go to the node's KV store.
                f"kv_cache: {{pool_bytes: 1, host_bytes: 64MiB}}\n"
                # Paced copies make a migration last long enough to kill a node in the middle.
                # Short sample windows: the loads of shards on every node reach the supervisor.
                f"eplb: {eplb}\n"
                f"nodes:\n")
        for n, r in zip(nodes, roles):
            f.write(f"  - {{name: {n.name}, address: '{n.address}', roles: {r}}}\n")


class cluster:
    """Three nodes: n1 prefill + 2 shards, n2 decode + 1 shard, n3 1 shard."""

    ROLES = ["{prefill: 1, expert_shard: 2}", "{decode: 1, expert_shard: 1}", "{expert_shard: 1}"]

    def __init__(self, brigade, model, workdir, tag, hosts, netns, tls, devices, serve_args=(),
                 eplb=DEFAULT_EPLB):
        self.nodes, self.coord = [], None
        secret = os.path.join(workdir, "secret")
        for i, host in enumerate(hosts):
            self.nodes.append(node(brigade, f"n{i + 1}", host, secret,
                                   os.path.join(workdir, f"{tag}-n{i + 1}.log"),
                                   netns[i] if netns else None))
        manifest = os.path.join(workdir, f"{tag}.yaml")
        write_manifest(manifest, model, secret, self.nodes, self.ROLES, tls, devices, eplb)
        self.coord = brigade_server(brigade, manifest, os.path.join(workdir, f"{tag}-serve.log"),
                                    extra_args=serve_args)

    def stop(self):
        if self.coord:
            self.coord.stop()
        for n in self.nodes:
            n.stop()


def check_outputs(c, expected):
    with concurrent.futures.ThreadPoolExecutor(max_workers=PROMPTS) as pool:
        answers = list(pool.map(lambda i: c.coord.post(
            "/v1/completions", {"model": "model", "prompt": prompt_ids(i), "max_tokens": TOKENS,
                                "temperature": 0, "ignore_eos": True}), range(PROMPTS)))
    bad = [i for i, a in enumerate(answers) if a["choices"][0]["text"] != expected[i]]
    placement = {n: a["node"] for n, a in c.coord.actors().items()}
    # A window closes once every shard, on whichever node, has sent its load sample.
    windows = len(c.coord.get("/v1/experts")["windows"])
    print(f"  {PROMPTS} concurrent prompts over 3 nodes: "
          f"{'identical to generate' if not bad else f'{len(bad)} differ'}; placement {placement}; "
          f"{windows} load-sample windows closed")
    return not bad and windows > 0


def check_speculation(c, brigade, model):
    """serve --speculate 4 with the decode worker on another node: its settings cross to the
    node, its multi-token updates cross back, and the text is generate's plain text."""
    tokens = 32
    prompts = [[(i * 53 + t * 29) % 1900 + 40 for t in range(5 + i % 4)] * 4 for i in range(6)]
    expected = [generate(brigade, model, p, tokens) for p in prompts]
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(prompts)) as pool:
        answers = list(pool.map(lambda p: c.coord.post(
            "/v1/completions", {"model": "model", "prompt": p, "max_tokens": tokens,
                                "temperature": 0, "ignore_eos": True}), prompts))
    bad = [i for i, a in enumerate(answers) if a["choices"][0]["text"] != expected[i]]
    drafted = c.coord.metric("brigade_speculative_draft_tokens_total")
    accepted = c.coord.metric("brigade_speculative_accepted_tokens_total")
    exercised = bool(accepted) and drafted is not None and drafted > accepted
    print(f"  speculation over 3 nodes: {len(prompts)} prompts "
          f"{'identical to generate' if not bad else f'{len(bad)} differ'}; "
          f"{accepted} of {drafted} drafts accepted"
          f"{'' if exercised else ' (drafts must be both kept and rejected)'}")
    return not bad and exercised


def check_draft_model(c, brigade, model):
    """serve --draft-model DIR with the decode worker on another node: the path crosses to the
    node, which loads the draft from its disk beside the target, and the text is generate's."""
    tokens = 24
    prompts = [[(i * 53 + t * 29) % 1900 + 40 for t in range(5 + i % 4)] * 4 for i in range(6)]
    expected = [generate(brigade, model, p, tokens) for p in prompts]
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(prompts)) as pool:
        answers = list(pool.map(lambda p: c.coord.post(
            "/v1/completions", {"model": "model", "prompt": p, "max_tokens": tokens,
                                "temperature": 0, "ignore_eos": True}), prompts))
    bad = [i for i, a in enumerate(answers) if a["choices"][0]["text"] != expected[i]]
    drafted = c.coord.metric("brigade_speculative_draft_tokens_total")
    sources = [r["detail"]["speculation"]["draft"] for r in c.coord.get("/v1/status")
               if r["role"] == "decode"]
    fed = bool(drafted) and sources == ["model"]
    print(f"  draft model over 3 nodes: {len(prompts)} prompts "
          f"{'identical to generate' if not bad else f'{len(bad)} differ'}; "
          f"{drafted} drafts fed by {sources}{'' if fed else ' (want drafts from a model)'}")
    return not bad and fed


def check_prompt_logprobs(c, brigade, model):
    """Echo with logprobs over 3 nodes: the prompt's log-probabilities cross from the prefill
    worker to the decode worker in the KV handoff, and equal the engine's after each prefix."""
    ids = [(t * 37) % 1900 + 40 for t in range(12)]
    answer = c.coord.post("/v1/completions", {"model": "model", "prompt": ids, "max_tokens": 4,
                                              "temperature": 0, "ignore_eos": True, "echo": True,
                                              "logprobs": 1})
    choice = answer["choices"][0]
    got = choice["logprobs"]["token_logprobs"][1:len(ids)]
    want = []
    npy = os.path.join(os.path.dirname(model), "prefix.npy")
    for i in range(1, len(ids)):
        run([brigade, "generate", "--model", model, "--prompt-ids", ",".join(map(str, ids[:i])),
             "--max-tokens", "1", "--temperature", "0", "--logits-out", npy])
        row = np.load(npy)[0].astype(np.float64)
        want.append(row[ids[i]] - (row.max() + math.log(np.exp(row - row.max()).sum())))
    worst = max(abs(a - b) for a, b in zip(got, want)) if len(got) == len(want) else math.inf
    text_ok = choice["text"].endswith(generate(brigade, model, ids, 4))
    print(f"  echo with logprobs over 3 nodes: prompt logprobs within {worst:.2g} of the "
          f"engine's; {'generated text identical' if text_ok else 'generated text differs'}")
    return worst <= 1e-5 and text_ok


def read_events(c):
    """The events /v1/events holds now (an SSE stream: read until it goes quiet)."""
    import socket
    import urllib.request
    events = []
    try:
        with urllib.request.urlopen(c.coord.url + "/v1/events?since=0", timeout=1.0) as r:
            for raw in r:
                line = raw.decode().strip()
                if line.startswith("data: "):
                    events.append(json.loads(line[6:]))
    except (socket.timeout, TimeoutError, OSError):
        pass
    return events


def check_live_balance(c, brigade, model, workdir):
    """The balancing chain over 3 nodes: a skewed, drifting workload (built on the model by
    bench balance --live) makes the live planner adopt plans, numbered for the nodes (copies
    within a node preferred, a cross-node copy charged double in the move budget); balance rises
    and every answer stays generate's."""
    path = os.path.join(workdir, "skew.json")
    run([brigade, "bench", "balance", "--live", "--model", model, "--workload-out", path])
    with open(path) as f:
        phases = [p["prompts"] for p in json.load(f)["phases"]]
    tokens = 8
    expected = {tuple(p): generate(brigade, model, p, tokens) for ph in phases for p in ph}
    windows = lambda: c.coord.get("/v1/experts")["windows"]  # noqa: E731
    bad = 0
    phase_start = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
        for prompts in phases:
            start = len(windows())
            phase_start.append(windows()[-1]["window"] + 1 if start else 0)
            turn = 0
            deadline = time.time() + 120
            while len(windows()) < start + 12 and time.time() < deadline:
                batch = [prompts[(turn + i) % len(prompts)] for i in range(8)]
                turn += 8
                answers = list(pool.map(lambda p: c.coord.post(
                    "/v1/completions", {"model": "model", "prompt": p, "max_tokens": tokens,
                                        "temperature": 0, "ignore_eos": True}), batch))
                bad += sum(a["choices"][0]["text"] != expected[tuple(p)]
                           for a, p in zip(answers, batch))
    experts = c.coord.get("/v1/experts")
    events = read_events(c)
    adopted = [e for e in events if e["kind"] == "plan_adopted"]
    first = adopted[0]["epoch"] if adopted else None
    ws = experts["windows"]
    before = [w["balancedness"] for w in ws if w["epoch"] == 0 and w["window"] < phase_start[1]]
    # The same (first) phase's load before and after: windows wholly under a plan's layout.
    after = [w for i, w in enumerate(ws) if first is not None and w["epoch"] >= first and i > 0
             and ws[i - 1]["epoch"] == w["epoch"] and w["window"] < phase_start[1]]
    mean = lambda xs: sum(xs) / len(xs) if xs else 0.0  # noqa: E731
    received = {s["name"]: s["detail"]["experts_received"] for s in c.coord.get("/v1/status")
                if s["role"] == "expert_shard"}
    crossed = sum(r["other_nodes_bytes"] for r in received.values())
    copies = [re.search(r"copies (\d+) within a node, (\d+) across nodes \(([\d.]+) of a "
                        r"budget of ([\d.]+)", e["detail"]) for e in adopted]
    # Each plan's copies are charged: within the budget, or over it only as replica counts need.
    within_budget = all(m and (float(m.group(3)) <= float(m.group(4)) or "need these" in e["detail"])
                        for m, e in zip(copies, adopted))
    ok = (len(adopted) >= 1 and within_budget and bad == 0 and after and
          mean([w["balancedness"] for w in after]) > mean(before))
    print(f"  live balancing over 3 nodes: {len(adopted)} plans adopted, copies "
          f"{[(int(m.group(1)), int(m.group(2))) for m in copies if m]} (within a node, across), "
          f"{crossed} bytes crossed nodes; balancedness of the first phase {mean(before):.3f} "
          f"before the first plan, {mean([w['balancedness'] for w in after]):.3f} after "
          f"({len(after)} windows); {bad} answers differ from "
          f"generate{'' if ok else ' FAILED'}")
    return ok


def check_node_kv_store(c, brigade, model):
    """The KV store runs on the prefill worker's node and serves a repeated prompt's blocks."""
    ids = prompt_ids(3) * 6
    expected = generate(brigade, model, ids, TOKENS)
    body = {"model": "model", "prompt": ids, "max_tokens": TOKENS, "temperature": 0,
            "ignore_eos": True}
    first = c.coord.post("/v1/completions", body)
    hits = 0
    for _ in range(50):  # demotion to the store runs in the background
        time.sleep(0.1)
        again = c.coord.post("/v1/completions", body)
        hits = again["usage"]["prompt_cache_hit_tokens"]
        if hits > 16:
            break
    actors = c.coord.actors()
    prefill_node = actors["prefill-0"]["node"]
    stores = {n: a["node"] for n, a in actors.items() if n.startswith("kv_store")}
    ok = (first["choices"][0]["text"] == expected and again["choices"][0]["text"] == expected
          and hits > 16 and list(stores.values()) == [prefill_node])
    print(f"  KV store beside prefill-0 on {prefill_node}: stores {stores}; a repeated "
          f"{len(ids)}-token prompt found {hits} tokens cached (the pool keeps 16); "
          f"{'identical to generate' if ok else 'FAILED'}")
    return ok


def check_tenant_salts(c, brigade, model):
    """Requests with different cache_salt share no block across nodes (the prefill worker's pool
    and its node's KV store); the same salt does. Every answer is generate's."""
    ids = prompt_ids(7) * 8  # 120 tokens: 7 full blocks
    expected = generate(brigade, model, ids, TOKENS)

    def ask(salt):
        body = {"model": "model", "prompt": ids, "max_tokens": TOKENS, "temperature": 0,
                "ignore_eos": True}
        if salt is not None:
            body["cache_salt"] = salt
        r = c.coord.post("/v1/completions", body)
        return r["choices"][0]["text"], r["usage"]["prompt_cache_hit_tokens"]

    texts = []
    text, first_hits = ask("tenant-a")
    texts.append(text)
    hits_a = 0
    for _ in range(50):  # demotion to the store runs in the background
        time.sleep(0.1)
        text, hits_a = ask("tenant-a")
        texts.append(text)
        if hits_a > 16:
            break
    text, hits_b = ask("tenant-b")
    texts.append(text)
    text, hits_none = ask(None)
    texts.append(text)
    ok = (first_hits == 0 and hits_a > 16 and hits_b == 0 and hits_none == 0
          and all(t == expected for t in texts))
    print(f"  cache_salt across nodes: tenant-a found {hits_a} tokens cached on its repeat; "
          f"tenant-b found {hits_b}, no salt {hits_none}; {len(texts)} answers "
          f"{'identical to generate' if ok else 'FAILED'}")
    return ok


def check_deepseek(brigade, workdir):
    """A DeepSeek-V3 model over three nodes: its latent KV rows cross from the prefill worker on n1
    to the decode worker on n2, its experts sit on every node, and its repeated prompt is served
    from n1's KV store; every answer is generate's."""
    # Served under the directory's name, "model", as the checks ask for.
    model = os.path.join(workdir, "deepseek", "model")
    os.makedirs(os.path.dirname(model), exist_ok=True)
    make_small_model(brigade, model, "deepseek_v3")
    expected = [generate(brigade, model, prompt_ids(i), TOKENS) for i in range(PROMPTS)]
    c = cluster(brigade, model, workdir, "lo-deepseek", ["127.0.0.1"] * 3, None, "tcp", "lo")
    try:
        print("deepseek_v3 over three nodes:")
        ok = check_outputs(c, expected)
        ok = check_node_kv_store(c, brigade, model) and ok
    finally:
        c.stop()
    return ok


def check_migration(c, expected):
    """A random re-plan while prompts run: new experts come from peer shards, across nodes."""
    before = c.coord.get("/v1/experts")["epoch"]
    with concurrent.futures.ThreadPoolExecutor(max_workers=PROMPTS) as pool:
        futures = [pool.submit(c.coord.post, "/v1/completions",
                               {"model": "model", "prompt": prompt_ids(i), "max_tokens": TOKENS,
                                "temperature": 0, "ignore_eos": True}) for i in range(PROMPTS)]
        started = c.coord.post("/v1/admin/replan", {"seed": 11})
        answers = [f.result() for f in futures]
    deadline = time.time() + 60
    while c.coord.get("/v1/experts")["migration"] is not None and time.time() < deadline:
        time.sleep(0.05)
    epoch = c.coord.get("/v1/experts")["epoch"]
    received = {s["name"]: s["detail"]["experts_received"] for s in c.coord.get("/v1/status")
                if s["role"] == "expert_shard"}
    other_nodes = sum(r["other_nodes"] for r in received.values())
    other_bytes = sum(r["other_nodes_bytes"] for r in received.values())
    from_checkpoint = sum(r["from_checkpoint"] for r in received.values())
    same = [i for i, a in enumerate(answers) if a["choices"][0]["text"] == expected[i]]
    ok = (started.get("replan") == "started" and epoch == before + 1 and other_nodes > 0
          and from_checkpoint == 0 and len(same) == PROMPTS)
    print(f"  migration to epoch {epoch} during {PROMPTS} prompts: {other_nodes} experts "
          f"({other_bytes} bytes) copied between nodes over the data plane, "
          f"{sum(r['same_node'] for r in received.values())} within a node, {from_checkpoint} "
          f"read from a checkpoint; {len(same)}/{PROMPTS} identical to generate"
          f"{'' if ok else ' FAILED: ' + json.dumps(received)}")
    return ok


def start_migration(c):
    """Starts a random re-plan and waits until its migration is in flight; returns whether it is."""
    if c.coord.post("/v1/admin/replan", {"seed": 23}).get("replan") != "started":
        return False
    deadline = time.time() + 10
    while time.time() < deadline:
        if c.coord.get("/v1/experts")["migration"] is not None:
            return True
        time.sleep(0.005)
    return False


def check_node_kill(c, brigade, model, victim, expect_dead, sig=signal.SIGKILL,
                    mid_migration=False):
    """Kills (or stops) `victim` mid-stream; every stream must still equal generate's text.
    With mid_migration, the kill also lands while a migration copies experts between the nodes:
    it must roll back to the layout before it."""
    tokens = 40
    expected = [generate(brigade, model, prompt_ids(i), tokens) for i in range(6)]
    killed_at, in_flight = [], []
    before = c.coord.get("/v1/experts")

    def kill_once():
        if not killed_at:
            if mid_migration:
                in_flight.append(start_migration(c))
            killed_at.append(time.time())
            victim.kill(sig)

    with concurrent.futures.ThreadPoolExecutor(max_workers=6) as pool:
        futures = [pool.submit(c.coord.stream,
                               {"model": "model", "prompt": prompt_ids(i), "max_tokens": tokens,
                                "temperature": 0, "ignore_eos": True},
                               kill_once if i == 0 else None) for i in range(6)]
        # The death shows up in the registry: measure how soon.
        noticed = None
        while noticed is None and time.time() - (killed_at[0] if killed_at else time.time()) < 30:
            if killed_at:
                actors = c.coord.actors()
                if all(actors[a]["death_cause"] and victim.name in actors[a]["death_cause"]
                       for a in expect_dead):
                    noticed = time.time() - killed_at[0]
            time.sleep(0.02)
        texts = [f.result() for f in futures]
    ok = all(t == e for t, e in zip(texts, expected)) and noticed is not None
    actors = c.coord.actors()
    causes = {a: (actors[a]["death_cause"], actors[a]["node"], actors[a]["generation"])
              for a in expect_dead}
    how = "kill -9" if sig == signal.SIGKILL else "SIGSTOP (hung)"
    migration = ""
    if mid_migration:
        deadline = time.time() + 30
        while c.coord.get("/v1/experts")["migration"] is not None and time.time() < deadline:
            time.sleep(0.05)
        after = c.coord.get("/v1/experts")
        rolled_back = (in_flight == [True] and after["epoch"] == before["epoch"]
                       and after["rebalances"]["rolled_back"]
                       == before["rebalances"]["rolled_back"] + 1)
        ok = ok and rolled_back
        migration = (f" and mid-migration: {'rolled back' if rolled_back else 'NOT rolled back'} "
                     f"(in flight when killed: {in_flight}, epoch {before['epoch']} -> "
                     f"{after['epoch']}, rebalances {after['rebalances']})")
    print(f"  {how} {victim.name} mid-stream{migration}: "
          f"{'6 streams identical to generate' if ok else 'FAILED'}; noticed after "
          f"{noticed if noticed is None else round(noticed, 3)} s; registry {causes}")
    if not ok:
        for t, e in zip(texts, expected):
            if t != e:
                print(f"    got {t!r}\n    expected {e!r}")
    return ok


def serve_with_odd_node(brigade, model, workdir, host, tag, odd_name, odd_secret, odd_env=None):
    """Serves over a good node and an odd one; returns serve's result and whether the odd node
    got anything spawned."""
    secret = os.path.join(workdir, "secret")
    good = node(brigade, "good", host, secret, os.path.join(workdir, f"{tag}-good.log"))
    odd_log = os.path.join(workdir, f"{tag}-odd.log")
    odd = node(brigade, odd_name, host, odd_secret, odd_log, env=odd_env)
    manifest = os.path.join(workdir, f"{tag}.yaml")
    write_manifest(manifest, model, secret, [good, odd],
                   ["{prefill: 1, decode: 1, expert_shard: 1}", "{expert_shard: 1}"], "tcp", "lo")
    try:
        out = subprocess.run([brigade, "serve", manifest, "--listen", "127.0.0.1:0"],
                             capture_output=True, text=True, timeout=120)
    finally:
        good.stop()
        odd.stop()
    return out, "spawned" in open(odd_log).read()


def last_words(out):
    return out.stderr.strip().splitlines()[-1] if out.stderr.strip() else out.stdout[-200:]


def check_wrong_secret(brigade, model, workdir, host):
    other = os.path.join(workdir, "other-secret")
    with open(other, "w") as f:
        f.write("a-different-secret-0123456789\n")
    out, spawned = serve_with_odd_node(brigade, model, workdir, host, "secret", "intruder", other)
    ok = out.returncode != 0 and "join secret" in out.stderr and "intruder" in out.stderr
    ok = ok and not spawned
    print(f"  node with the wrong join secret: {'refused' if ok else 'NOT refused'}: "
          f"{last_words(out)}")
    return ok


def check_other_numerics(brigade, model, workdir, host):
    # A node whose CPU kernels compute in another numerics class (bf16 dot products) would give
    # other answers than the coordinator's: it is refused at join, naming both classes.
    probe = subprocess.run([brigade, "tokenize", "--help"], capture_output=True, text=True,
                           env={**os.environ, "BRIGADE_CPU_KERNELS": "avx512_bf16"})
    if "lacks" in probe.stderr:
        print("  node in another numerics class: skipped, this CPU lacks AVX512-BF16")
        return True
    out, spawned = serve_with_odd_node(brigade, model, workdir, host, "numerics", "bf16dot",
                                       os.path.join(workdir, "secret"),
                                       {"BRIGADE_CPU_KERNELS": "avx512_bf16"})
    ok = (out.returncode != 0 and "bf16dot" in out.stderr and "bf16-dot numerics" in out.stderr
          and "in f32" in out.stderr and "BRIGADE_CPU_KERNELS" in out.stderr and not spawned)
    print(f"  node in another numerics class: {'refused' if ok else 'NOT refused'}: "
          f"{last_words(out)}")
    return ok


def check_dry_run(brigade, workdir):
    manifest = os.path.join(workdir, "dry.yaml")
    with open(manifest, "w") as f:
        f.write("model: /models/x\njoin_secret_file: /dev/null\nnodes:\n"
                "  - {name: a, address: '10.0.0.1:7000', roles: {prefill: 1, expert_shard: 2}}\n"
                "  - {name: b, address: '10.0.0.2:7000', roles: {decode: 2, expert_shard: 2}}\n")
    out = run([brigade, "deploy", "--dry-run", manifest]).stdout
    ok = ("node a (10.0.0.1:7000): expert_shard-0 expert_shard-1 prefill-0" in out and
          "node b (10.0.0.2:7000): expert_shard-2 expert_shard-3 decode-0 decode-1" in out and
          "expert slots not checked" in out)
    print(f"  deploy --dry-run: {'placement printed node by node' if ok else 'WRONG:' + out}")
    # With the model readable here, the slots are checked against its experts (8 per layer).
    model = os.path.join(workdir, "model")
    for slots, fits in ((3, True), (1, False)):
        path = os.path.join(workdir, f"dry-{slots}.yaml")
        with open(path, "w") as f:
            f.write(f"model: {model}\nroles:\n  expert_shard: {{count: 4, slots_per_shard: {slots}}}\n")
        r = subprocess.run([brigade, "deploy", "--dry-run", path], capture_output=True, text=True)
        said = r.stdout + r.stderr
        good = (r.returncode == 0 and "experts: 8 per layer (qwen3_moe); 12 slots, 4 spare" in said
                if fits else r.returncode == 1 and "raise slots_per_shard" in said)
        print(f"  deploy --dry-run, 4 shards x {slots} slots: "
              f"{('accepted' if fits else 'refused') if good else 'WRONG: ' + said}")
        ok = ok and good
    # Expert groups kept per node need the model's n_group (1 here) divisible by the shard nodes.
    path = os.path.join(workdir, "dry-groups.yaml")
    with open(path, "w") as f:
        f.write(f"model: {model}\njoin_secret_file: /dev/null\neplb: {{group_placement: node}}\n"
                "nodes:\n"
                "  - {name: a, address: '10.0.0.1:7000', roles: {prefill: 1, decode: 1, expert_shard: 2}}\n"
                "  - {name: b, address: '10.0.0.2:7000', roles: {expert_shard: 2}}\n")
    r = subprocess.run([brigade, "deploy", "--dry-run", path], capture_output=True, text=True)
    said = r.stdout + r.stderr
    good = (r.returncode == 1 and "eplb.group_placement: node cannot hold" in said
            and "n_group 1" in said)
    print(f"  deploy --dry-run, group_placement node on a model of one group: "
          f"{'refused' if good else 'WRONG: ' + said}")
    return ok and good


class namespaces:
    """Three network namespaces on a bridge: 10.77.0.1 (host), .2, .3, .4 (nodes)."""

    def __init__(self, tag):
        self.tag = tag
        self.names = [f"brig{tag}{i}" for i in range(1, 4)]
        self.bridge = f"brbr{tag}"
        self.cleanup()
        sh = lambda *a: run(["ip"] + list(a))
        sh("link", "add", self.bridge, "type", "bridge")
        sh("addr", "add", "10.77.0.1/24", "dev", self.bridge)
        sh("link", "set", self.bridge, "up")
        for i, ns in enumerate(self.names, start=2):
            sh("netns", "add", ns)
            sh("link", "add", f"vb{tag}{i}", "type", "veth", "peer", "name", f"vn{tag}{i}")
            sh("link", "set", f"vb{tag}{i}", "master", self.bridge)
            sh("link", "set", f"vb{tag}{i}", "up")
            sh("link", "set", f"vn{tag}{i}", "netns", ns)
            sh("netns", "exec", ns, "ip", "addr", "add", f"10.77.0.{i}/24", "dev", f"vn{tag}{i}")
            sh("netns", "exec", ns, "ip", "link", "set", f"vn{tag}{i}", "up")
            sh("netns", "exec", ns, "ip", "link", "set", "lo", "up")
        self.hosts = [f"10.77.0.{i}" for i in range(2, 5)]

    def cleanup(self):
        for ns in getattr(self, "names", []):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        subprocess.run(["ip", "link", "del", getattr(self, "bridge", "none")], capture_output=True)


def main():
    brigade, workdir = sys.argv[1], sys.argv[2]
    use_netns = "--netns" in sys.argv
    use_shm = "--shm" in sys.argv
    shutil.rmtree(workdir, ignore_errors=True)
    os.makedirs(workdir)
    with open(os.path.join(workdir, "secret"), "w") as f:
        f.write("brigade-test-secret-" + os.urandom(8).hex() + "\n")
    model = os.path.join(workdir, "model")
    run([brigade, "make-model", "--family", "qwen3_moe", "--out", model, "--layers", "2",
         "--hidden", "64", "--heads", "4", "--kv-heads", "2", "--head-dim", "16", "--experts", "8",
         "--top-k", "2", "--moe-inter", "32", "--seed", "5"])
    expected = [generate(brigade, model, prompt_ids(i), TOKENS) for i in range(PROMPTS)]
    ok = True
    if use_netns:
        if os.geteuid() != 0:
            print("SKIP: network namespaces need root (the CI runs as root)")
            return 0
        ns = namespaces(str(os.getpid() % 1000))
        try:
            # The nodes' data planes talk TCP over their veth interfaces, through the bridge.
            c = cluster(brigade, model, workdir, "netns", ns.hosts, ns.names, "tcp", "")
            try:
                print("three nodes in network namespaces (10.77.0.2-4 on a bridge):")
                ok = check_outputs(c, expected)
                ok = check_node_kill(c, brigade, model, c.nodes[2], ["expert_shard-3"]) and ok
            finally:
                c.stop()
        finally:
            ns.cleanup()
    elif use_shm:
        print("three nodes on one host, data plane over shared memory:")
        c = cluster(brigade, model, workdir, "shm", ["127.0.0.1"] * 3, None,
                    "posix,sysv,cma,self", "")
        try:
            ok = check_outputs(c, expected)
            ok = check_migration(c, expected) and ok
            ok = check_node_kill(c, brigade, model, c.nodes[2], ["expert_shard-3"],
                                 signal.SIGSTOP) and ok
            c.nodes[2].kill(signal.SIGCONT)
            ok = check_node_kill(c, brigade, model, c.nodes[1], ["decode-0", "expert_shard-2"]) and ok
        finally:
            c.stop()
    else:
        print("three nodes on loopback:")
        c = cluster(brigade, model, workdir, "lo", ["127.0.0.1"] * 3, None, "tcp", "lo")
        try:
            ok = check_outputs(c, expected)
            ok = check_prompt_logprobs(c, brigade, model) and ok
            ok = check_migration(c, expected) and ok
            ok = check_node_kv_store(c, brigade, model) and ok
            ok = check_tenant_salts(c, brigade, model) and ok
            ok = check_node_kill(c, brigade, model, c.nodes[2], ["expert_shard-3"],
                                 mid_migration=True) and ok
            ok = check_node_kill(c, brigade, model, c.nodes[1], ["decode-0", "expert_shard-2"]) and ok
        finally:
            c.stop()
        c = cluster(brigade, model, workdir, "lo-speculate", ["127.0.0.1"] * 3, None, "tcp", "lo",
                    serve_args=["--speculate", "4"])
        try:
            ok = check_speculation(c, brigade, model) and ok
        finally:
            c.stop()
        draft = os.path.join(workdir, "draft")
        subprocess.run([brigade, "make-model", "--family", "qwen3", "--out", draft, "--hidden",
                        "64", "--heads", "4", "--kv-heads", "2", "--head-dim", "16", "--layers",
                        "1", "--seed", "4"], check=True, capture_output=True)
        c = cluster(brigade, model, workdir, "lo-draft", ["127.0.0.1"] * 3, None, "tcp", "lo",
                    serve_args=["--draft-model", draft])
        try:
            ok = check_draft_model(c, brigade, model) and ok
        finally:
            c.stop()
        c = cluster(brigade, model, workdir, "lo-balance", ["127.0.0.1"] * 3, None, "tcp", "lo",
                    eplb="{copy_interval_ms: 0, sample_interval_steps: 16, "
                         "replan_interval_steps: 64}")
        try:
            ok = check_live_balance(c, brigade, model, workdir) and ok
        finally:
            c.stop()
        ok = check_deepseek(brigade, workdir) and ok
        ok = check_wrong_secret(brigade, model, workdir, "127.0.0.1") and ok
        ok = check_other_numerics(brigade, model, workdir, "127.0.0.1") and ok
        ok = check_dry_run(brigade, workdir) and ok
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
