#!/usr/bin/env python3
"""Log-probabilities and sampling rules through the HTTP API, checked against the engine's own
logits: `brigade generate --logits-out` writes the raw logits row of every generated token, and
this test applies the rules (logit_bias, min_tokens, repetition, frequency and presence
penalties, temperature) itself, as OpenAI and vLLM define them, then takes the log-softmax. The
API's numbers must match to 1e-5, through the actor topology (twice: the second time the prompt
is a prefix cache hit) and through the single-process engine, greedy and sampled, with and
without penalties; the tokens must be generate's.

Echo and scoring: a prompt's own log-probabilities (echo with max_tokens 0, as evaluation
harnesses score multiple choice) must equal the log-softmax of the logits generate writes after
each prefix of the prompt, also when the prompt's blocks are a prefix cache hit, and must rank
continuations as those logits do. n choices: choice i is generate's with the seed
splitmix64(seed, i); best_of answers the choice whose tokens are likeliest together. A list of
prompts answers each prompt as it is answered alone.

Usage: logprobs_test.py BRIGADE_BIN WORKDIR
"""
import json
import math
import os
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "support"))
from brigade_server import brigade_server, make_small_model  # noqa: E402

PROMPT = [11, 12, 13, 14, 11, 12, 13, 14, 11, 12, 13, 14, 11, 12, 13, 14, 11, 12, 13, 14, 15]
TOP = 5
CASES = {
    "greedy": {"temperature": 0},
    "sampled": {"temperature": 0.8, "seed": 7},
    "greedy with penalties": {"temperature": 0, "presence_penalty": 0.6, "frequency_penalty": 0.9,
                              "repetition_penalty": 1.4, "logit_bias": {"20": 4.0, "21": -50},
                              "min_tokens": 6},
    "sampled with penalties": {"temperature": 1.3, "seed": 11, "presence_penalty": -0.5,
                               "frequency_penalty": 1.5, "repetition_penalty": 0.8,
                               "logit_bias": {"30": 2.5}},
}
MAX_TOKENS = 16


def generate_args(params):
    args = ["--temperature", str(params.get("temperature", 1.0)), "--seed",
            str(params.get("seed", 0)), "--max-tokens", str(MAX_TOKENS)]
    for flag in ["presence_penalty", "frequency_penalty", "repetition_penalty", "min_tokens"]:
        if flag in params:
            args += ["--" + flag.replace("_", "-"), str(params[flag])]
    for token, bias in params.get("logit_bias", {}).items():
        args += ["--logit-bias", f"{token}={bias}"]
    return args


def rules(row, params, prompt, generated, stop_ids):
    """The row after the sampling rules, written out from their definitions."""
    z = row.astype(np.float64).copy()
    for token, bias in params.get("logit_bias", {}).items():
        z[int(token)] = np.float32(z[int(token)] + np.float32(bias))
    if len(generated) < params.get("min_tokens", 0):
        for s in stop_ids:
            z[s] = -math.inf
    r = params.get("repetition_penalty", 1.0)
    for t in set(prompt) | set(generated):
        z[t] = z[t] / r if z[t] > 0 else z[t] * r
    for t in set(generated):
        z[t] -= generated.count(t) * params.get("frequency_penalty", 0) + \
            params.get("presence_penalty", 0)
    temperature = params.get("temperature", 1.0)
    z = z / (temperature if temperature > 0 else 1.0)
    finite = z[np.isfinite(z)]
    return z - (finite.max() + math.log(np.exp(finite - finite.max()).sum()))


def expected(brigade, model, params, workdir, stop_ids):
    npy = os.path.join(workdir, "logits.npy")
    out = subprocess.run([brigade, "generate", "--model", model, "--prompt-ids",
                          ",".join(map(str, PROMPT)), "--json", "--logits-out", npy] +
                         generate_args(params), capture_output=True, text=True, check=True)
    ids = json.loads(out.stdout)["ids"]
    rows = np.load(npy)
    logprobs = [rules(rows[i], params, PROMPT, ids[:i], stop_ids) for i in range(len(ids))]
    return ids, logprobs


def prefix_logprobs(brigade, model, prompt, workdir):
    """log-softmax(logits after prompt[:i])[prompt[i]] for i >= 1, each from its own generate
    run (the engine's decode of the last row, an independent path from prefill's rows)."""
    npy = os.path.join(workdir, "prefix.npy")
    out = []
    for i in range(1, len(prompt)):
        subprocess.run([brigade, "generate", "--model", model, "--prompt-ids",
                        ",".join(map(str, prompt[:i])), "--max-tokens", "1", "--temperature", "0",
                        "--logits-out", npy], capture_output=True, check=True)
        row = np.load(npy)[0].astype(np.float64)
        out.append(row[prompt[i]] - (row.max() + math.log(np.exp(row - row.max()).sum())))
    return out


def choice_seed(seed, index):
    """serve/openai_request.hpp's choice_seed: choice 0 keeps the seed, others a splitmix64."""
    if index == 0:
        return seed
    mask = (1 << 64) - 1
    z = (seed + 0x9E3779B97F4A7C15 * index) & mask
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
    return z ^ (z >> 31)


def generate_text(brigade, model, prompt, params, seed):
    out = subprocess.run([brigade, "generate", "--model", model, "--prompt-ids",
                          ",".join(map(str, prompt)), "--json", "--temperature",
                          str(params["temperature"]), "--seed", str(seed), "--max-tokens",
                          str(MAX_TOKENS)], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)["text"]


def check_scoring(check, label, srv, name, brigade, model, workdir, stop_ids):
    """Echo, prompt log-probabilities through the cache, multiple-choice ranking, n, best_of."""
    # Three blocks and a bit: the cache holds whole blocks, so a hit covers most of the prompt.
    context = [40 + (i * 7) % 50 for i in range(50)]
    want = prefix_logprobs(brigade, model, context, workdir)
    score = dict(model=name, prompt=context, echo=True, max_tokens=0, logprobs=2)
    rounds = [("", {})] if "engine" in label else [("", {}), (" (prompt cached)", {})]
    for again, _ in rounds:
        if again:
            # The same prompt, plainly, until the router sees its blocks cached.
            for _ in range(40):
                status, r = post(srv, "/v1/completions",
                                 dict(model=name, prompt=context, max_tokens=1))
                if status != 200 or r["usage"]["prompt_tokens_details"]["cached_tokens"]:
                    break
                time.sleep(0.25)
            check(f"{label}: the scored prompt is in the cache",
                  r["usage"]["prompt_tokens_details"]["cached_tokens"] > 0, r.get("usage"))
        status, r = post(srv, "/v1/completions", score)
        check(f"{label}: echo with max_tokens 0 answered{again}", status == 200, r)
        if status != 200:
            continue
        lp = r["choices"][0]["logprobs"]
        got = lp["token_logprobs"]
        check(f"{label}: one entry per prompt token, the first null{again}",
              len(got) == len(context) and got[0] is None and lp["top_logprobs"][0] is None,
              (len(got), got[:2]))
        worst = max(abs(a - b) for a, b in zip(got[1:], want)) if len(got) > 1 else 1.0
        check(f"{label}: prompt logprobs equal the engine's after each prefix{again}",
              worst <= 1e-5, f"worst difference {worst}")
        check(f"{label}: echo returns the prompt's text and nothing more{again}",
              r["choices"][0]["text"] == "".join(lp["tokens"]) and
              r["usage"]["completion_tokens"] == 0, (r["choices"][0]["text"][:40], r["usage"]))
        check(f"{label}: text offsets count the echoed text{again}",
              lp["text_offset"][1] == len(lp["tokens"][0].encode()), lp["text_offset"][:3])

    # Multiple choice, as harnesses score it: the loglikelihood of each continuation.
    stem = context[:20]
    continuations = [[60, 61, 62], [70, 71], [80, 81, 82, 83], [41, 48]]
    served, engine = [], []
    for cont in continuations:
        full = stem + cont
        status, r = post(srv, "/v1/completions", dict(model=name, prompt=full, echo=True,
                                                      max_tokens=0, logprobs=0))
        served.append(sum(r["choices"][0]["logprobs"]["token_logprobs"][len(stem):])
                      if status == 200 else -math.inf)
        engine.append(sum(prefix_logprobs(brigade, model, full, workdir)[len(stem) - 1:]))
    rank = lambda xs: sorted(range(len(xs)), key=lambda i: -xs[i])  # noqa: E731
    check(f"{label}: multiple-choice continuations rank as the engine's logprobs rank them",
          rank(served) == rank(engine) and max(abs(a - b) for a, b in zip(served, engine)) < 1e-4,
          (served, engine))

    # Echo with generated tokens: the prompt's entries, then generate's tokens' own.
    ids, truth = expected(brigade, model, {"temperature": 0}, workdir, stop_ids)
    status, r = post(srv, "/v1/completions", dict(model=name, prompt=PROMPT, echo=True,
                                                  max_tokens=MAX_TOKENS, logprobs=TOP,
                                                  temperature=0))
    if status == 200:
        lp = r["choices"][0]["logprobs"]
        tail = {k: lp[k][len(PROMPT):] for k in ["token_logprobs", "top_logprobs", "tokens"]}
        check_completion(check, f"{label}, echo and generated", {"logprobs": tail}, ids, truth)
    else:
        check(f"{label}: echo with tokens answered", False, r)

    # n choices share the prompt's KV: the later ones find its blocks in the cache, on the same
    # prefill worker (the topology has two).
    if "engine" not in label:
        def pool_hits():
            roles = json.loads(urllib.request.urlopen(srv.url + "/v1/status").read())
            router = [r for r in roles if r["role"] == "router"][0]
            return router["detail"]["cache"]["scenarios"]["chat"]["pool"]
        fresh = [100 + (i * 11) % 300 for i in range(67)]
        before = pool_hits()
        status, r = post(srv, "/v1/completions", dict(model=name, prompt=fresh, n=4, max_tokens=2))
        # 67 tokens: 4 whole blocks of 16 are reusable; choices 1-3 each take them from the cache.
        check(f"{label}: n=4 computes the prompt once, the other choices hit the cache",
              status == 200 and pool_hits() - before == 3 * 64, (status, pool_hits() - before))

    # n choices, seeded: each is generate's with its derived seed, and the same request repeats.
    sampled = {"temperature": 0.9, "seed": 5}
    body = dict(sampled, model=name, prompt=PROMPT, max_tokens=MAX_TOKENS, n=3, ignore_eos=True)
    status, first = post(srv, "/v1/completions", body)
    status2, second = post(srv, "/v1/completions", body)
    if status == 200 and status2 == 200:
        texts = [c["text"] for c in sorted(first["choices"], key=lambda c: c["index"])]
        want_texts = [generate_text(brigade, model, PROMPT, sampled, choice_seed(5, i))
                      for i in range(3)]
        check(f"{label}: n=3 choices are generate's with seeds (seed, i)", texts == want_texts,
              (texts, want_texts))
        check(f"{label}: the same n=3 request gives the same answers",
              texts == [c["text"] for c in sorted(second["choices"], key=lambda c: c["index"])])
        check(f"{label}: n=3 usage counts the prompt once and every choice's tokens",
              first["usage"]["prompt_tokens"] == len(PROMPT) and
              first["usage"]["completion_tokens"] == 3 * MAX_TOKENS, first["usage"])
    else:
        check(f"{label}: n=3 answered", False, (first, second))

    # best_of: the choice whose tokens are likeliest together (under the distribution drawn from).
    status, r = post(srv, "/v1/completions", dict(sampled, model=name, prompt=PROMPT, n=1,
                                                  best_of=4, max_tokens=8, ignore_eos=True))
    sums = []
    for i in range(4):
        npy = os.path.join(workdir, "best.npy")
        out = subprocess.run([brigade, "generate", "--model", model, "--prompt-ids",
                              ",".join(map(str, PROMPT)), "--json", "--logits-out", npy,
                              "--temperature", "0.9", "--seed", str(choice_seed(5, i)),
                              "--max-tokens", "8", "--ignore-eos"],
                             capture_output=True, text=True, check=True)
        got = json.loads(out.stdout)
        rows = np.load(npy)
        sums.append((sum(rules(rows[j], sampled, PROMPT, got["ids"][:j], [])[t]
                         for j, t in enumerate(got["ids"])), got["text"]))
    best = max(range(4), key=lambda i: (sums[i][0], -i))
    check(f"{label}: best_of=4 answers the likeliest of the four choices",
          status == 200 and len(r["choices"]) == 1 and r["choices"][0]["text"] == sums[best][1] and
          r["choices"][0]["logprobs"] is None, (r if status != 200 else r["choices"], sums))


def check_batch(check, label, srv, name, brigade, model, workdir):
    """A list of prompts: each prompt's choices are what it gets alone (generate's, with the
    seeds (seed, i)), in order prompt * n + i; echoed prompts are scored as the engine scores
    them; usage counts every prompt once."""
    prompts = [PROMPT, [40 + (i * 7) % 50 for i in range(23)], [9, 8, 7, 6, 5]]
    sampled = {"temperature": 0.9, "seed": 5}
    body = dict(sampled, model=name, prompt=prompts, max_tokens=MAX_TOKENS, n=2, ignore_eos=True)
    status, r = post(srv, "/v1/completions", body)
    if status != 200:
        return check(f"{label}: a list of 3 prompts with n=2 answered", False, r)
    choices = sorted(r["choices"], key=lambda c: c["index"])
    want = [generate_text(brigade, model, p, sampled, choice_seed(5, i))
            for p in prompts for i in range(2)]
    check(f"{label}: 3 prompts x n=2: choice p*2+i is generate's for prompt p with seed (seed, i)",
          [c["index"] for c in choices] == list(range(6)) and
          [c["text"] for c in choices] == want, ([c["text"] for c in choices], want))
    check(f"{label}: a list of prompts counts each prompt once and every choice's tokens",
          r["usage"]["prompt_tokens"] == sum(map(len, prompts)) and
          r["usage"]["completion_tokens"] == 6 * MAX_TOKENS, r["usage"])
    streamed = {}
    req = urllib.request.Request(srv.url + "/v1/completions",
                                 data=json.dumps(dict(body, stream=True)).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=180) as answer:
        for raw in answer:
            line = raw.decode().strip()
            if line.startswith("data: ") and line != "data: [DONE]":
                for c in json.loads(line[6:]).get("choices", []):
                    streamed[c["index"]] = streamed.get(c["index"], "") + c["text"]
    check(f"{label}: a streamed list of prompts gives each index the whole answer's text",
          [streamed.get(i) for i in range(6)] == want, streamed)
    # Scoring a batch, as evaluation harnesses send it: each prompt's own log-probabilities.
    scored = prompts[1:]
    status, r = post(srv, "/v1/completions", dict(model=name, prompt=scored, echo=True,
                                                  max_tokens=0, logprobs=1))
    ok = status == 200 and len(r["choices"]) == 2
    worst = 0.0
    for p, c in zip(scored, sorted(r["choices"], key=lambda c: c["index"]) if ok else []):
        got = c["logprobs"]["token_logprobs"]
        truth = prefix_logprobs(brigade, model, p, workdir)
        ok &= len(got) == len(p) and got[0] is None
        worst = max([worst] + [abs(a - b) for a, b in zip(got[1:], truth)])
    check(f"{label}: echo scores each prompt of a list as the engine's logits do",
          ok and worst <= 1e-5, (status, worst))
    # best_of per prompt: each prompt's answer is the one it gets alone.
    alone = []
    for p in prompts[:2]:
        _, a = post(srv, "/v1/completions", dict(sampled, model=name, prompt=p, best_of=3,
                                                 max_tokens=8, ignore_eos=True))
        alone.append(a["choices"][0]["text"])
    status, r = post(srv, "/v1/completions", dict(sampled, model=name, prompt=prompts[:2],
                                                  best_of=3, max_tokens=8, ignore_eos=True))
    check(f"{label}: best_of=3 over 2 prompts answers each prompt's likeliest",
          status == 200 and [c["text"] for c in sorted(r["choices"], key=lambda c: c["index"])]
          == alone, (r, alone))
    for bad, why in [([PROMPT] * 65, "65 prompts"), ([PROMPT, []], "an empty prompt"),
                     ([PROMPT, 7], "a number in a list of prompts")]:
        status, r = post(srv, "/v1/completions", dict(model=name, prompt=bad, max_tokens=2))
        check(f"{label}: {why} is a 400 naming prompt",
              status == 400 and r["error"]["param"] == "prompt", (status, r))
    status, r = post(srv, "/v1/completions", dict(model=name, prompt=[PROMPT] * 5, n=64,
                                                  max_tokens=2))
    check(f"{label}: 5 prompts x n=64 (over 256 generations) is a 400 naming prompt",
          status == 400 and r["error"]["param"] == "prompt", (status, r))


def post(srv, path, body):
    req = urllib.request.Request(srv.url + path, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=180) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def stream(srv, path, body):
    """The streamed chunks' logprobs entries, concatenated."""
    req = urllib.request.Request(srv.url + path, data=json.dumps(dict(body, stream=True)).encode(),
                                 headers={"Content-Type": "application/json"})
    entries = []
    with urllib.request.urlopen(req, timeout=180) as r:
        for raw in r:
            line = raw.decode().strip()
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            event = json.loads(line[6:])
            for choice in event.get("choices", []):
                if choice.get("logprobs"):
                    entries += choice["logprobs"]["content"]
    return entries


class checker:
    def __init__(self):
        self.ok = True

    def __call__(self, name, cond, detail=""):
        print(f"{'ok  ' if cond else 'FAIL'} {name}{': ' + str(detail) if detail and not cond else ''}")
        self.ok &= bool(cond)


def close(a, b):
    if math.isinf(b):
        return a <= -9999.0
    return abs(a - b) <= 1e-5


def check_completion(check, label, choice, ids, want):
    lp = choice["logprobs"]
    check(f"{label}: {len(ids)} tokens, one logprob each", len(lp["token_logprobs"]) == len(ids),
          (len(lp["token_logprobs"]), len(ids)))
    worst = 0.0
    for i, token in enumerate(ids[:len(lp["token_logprobs"])]):
        got = lp["token_logprobs"][i]
        if not close(got, want[i][token]):
            worst = max(worst, abs(got - want[i][token]))
        # The top alternatives are among the K largest of the expected row, the first of them
        # included (two tokens with the same text share one key of the object).
        top_values = sorted(lp["top_logprobs"][i].values(), reverse=True)
        best = np.sort(want[i][np.isfinite(want[i])])[::-1][:TOP]
        if not top_values or not close(top_values[0], best[0]) or \
                any(not any(close(a, b) for b in best) for a in top_values):
            worst = max(worst, 1.0)
    check(f"{label}: logprobs equal the log-softmax of the engine's logits after the rules",
          worst == 0.0, f"worst difference {worst}")


def check_chat_entries(check, label, entries, tok_text, ids, want):
    check(f"{label}: one chat logprob entry per token", len(entries) == len(ids),
          (len(entries), len(ids)))
    bad = [i for i, e in enumerate(entries[:len(ids)])
           if not close(e["logprob"], want[i][ids[i]]) or len(e["top_logprobs"]) != 3 or
           bytes(e["bytes"]).decode("utf-8", "replace") != e["token"]]
    check(f"{label}: chat logprobs match, 3 alternatives each, bytes spell the token", not bad,
          bad[:5])


def end_of_sequence_ids(model):
    """The ids generation stops at (what min_tokens holds back): config.json's eos_token_id and
    the tokenizer's eos_token, as the server and `brigade generate` take them."""
    with open(os.path.join(model, "config.json")) as f:
        eos = json.load(f).get("eos_token_id")
    ids = set(eos if isinstance(eos, list) else [] if eos is None else [eos])
    with open(os.path.join(model, "tokenizer_config.json")) as f:
        name = json.load(f).get("eos_token")
    with open(os.path.join(model, "tokenizer.json")) as f:
        ids |= {t["id"] for t in json.load(f)["added_tokens"] if t["content"] == name}
    return sorted(ids)


def main():
    brigade, workdir = sys.argv[1:3]
    shutil.rmtree(workdir, ignore_errors=True)
    os.makedirs(workdir)
    model = os.path.join(workdir, "model")
    make_small_model(brigade, model)
    stop_ids = end_of_sequence_ids(model)
    manifest = os.path.join(workdir, "manifest.yaml")
    with open(manifest, "w") as f:
        f.write(f"model: {model}\n"
                "roles: {prefill: {count: 2}, decode: {count: 2},"
                " expert_shard: {count: 3, slots_per_shard: 3}}\n")
    check = checker()
    truth = {name: expected(brigade, model, params, workdir, stop_ids)
             for name, params in CASES.items()}
    for label, extra in [("actor topology", []), ("single-process engine", ["--engine"])]:
        srv = brigade_server(brigade, manifest, os.path.join(workdir, f"serve-{extra}.log"),
                             extra_args=extra)
        try:
            name = srv.get("/v1/models")["data"][0]["id"]
            for case, params in CASES.items():
                ids, want = truth[case]
                body = dict(params, model=name, prompt=PROMPT, max_tokens=MAX_TOKENS,
                            logprobs=TOP)
                rounds = ["", " (prompt cached)"] if not extra else [""]
                for again in rounds:
                    status, r = post(srv, "/v1/completions", body)
                    # The router learns what a prefill worker cached a moment after it happened.
                    for _ in range(20 if again else 0):
                        if status != 200 or r["usage"]["prompt_tokens_details"]["cached_tokens"]:
                            break
                        time.sleep(0.25)
                        status, r = post(srv, "/v1/completions", body)
                    tag = f"{label}, {case}{again}"
                    check(f"{tag}: answered", status == 200, r)
                    if status != 200:
                        continue
                    if again:
                        check(f"{tag}: the prompt was a cache hit",
                              r["usage"]["prompt_tokens_details"]["cached_tokens"] > 0, r["usage"])
                    choice = r["choices"][0]
                    # The answer's tokens are generate's: compare through the text offsets' count
                    # and the chat path below (completions give text, not ids).
                    check_completion(check, tag, choice, ids, want)
                chat = dict(params, model=name, max_tokens=MAX_TOKENS, logprobs=True,
                            top_logprobs=3, messages=[{"role": "user", "content": "count"}])
                status, whole = post(srv, "/v1/chat/completions", chat)
                check(f"{label}, {case}: chat answered", status == 200, whole)
                streamed = stream(srv, "/v1/chat/completions", chat)
                if status == 200:
                    entries = whole["choices"][0]["logprobs"]["content"]
                    check(f"{label}, {case}: streamed chat logprobs equal the whole answer's",
                          [(e["token"], e["logprob"]) for e in streamed] ==
                          [(e["token"], e["logprob"]) for e in entries])
            check_scoring(check, label, srv, name, brigade, model, workdir, stop_ids)
            check_batch(check, label, srv, name, brigade, model, workdir)
            # Bad values name their field.
            for bad, field in [({"n": 0}, "n"), ({"n": 65}, "n"), ({"n": -2}, "n"),
                               ({"n": 3, "best_of": 2}, "best_of"),
                               ({"best_of": 2, "stream": True}, "best_of"),
                               ({"max_tokens": 0}, "max_tokens"), ({"echo": 1}, "echo"),({"logprobs": 21}, "logprobs"), ({"logprobs": -1}, "logprobs"),
                               ({"logit_bias": {"5": 101}}, "logit_bias.5"),
                               ({"logit_bias": {"-3": 1}}, "logit_bias.-3"),
                               ({"logit_bias": {"999999": 1}}, "logit_bias.999999"),
                               ({"presence_penalty": 2.5}, "presence_penalty"),
                               ({"frequency_penalty": "x"}, "frequency_penalty"),
                               ({"repetition_penalty": 0}, "repetition_penalty"),
                               ({"min_tokens": MAX_TOKENS + 1}, "min_tokens")]:
                status, r = post(srv, "/v1/completions",
                                 dict(dict(model=name, prompt=PROMPT, max_tokens=MAX_TOKENS),
                                      **bad))
                check(f"{label}: {json.dumps(bad)} is a 400 naming {field}",
                      status == 400 and r["error"]["param"] == field, (status, r))
            status, r = post(srv, "/v1/chat/completions",
                             {"model": name, "messages": [{"role": "user", "content": "x"}],
                              "top_logprobs": 2})
            check(f"{label}: top_logprobs without logprobs is a 400",
                  status == 400 and r["error"]["param"] == "top_logprobs", r)
        finally:
            srv.stop()
    print("all checks passed" if check.ok else "some checks FAILED")
    return 0 if check.ok else 1


if __name__ == "__main__":
    sys.exit(main())
