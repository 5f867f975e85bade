#!/usr/bin/env python3
"""Sends N greedy completions at once to a running `brigade serve` and prints their texts as one
JSON list, in prompt order (scripts/gpu-check.sh compares the lists of two servers).

    serve_answers.py URL N MAX_TOKENS

The prompts differ in words and length, so the server's batches mix contexts of every size;
each request is its own HTTP connection, all in flight together. A request that fails prints
its error on stderr and leaves null in its place."""
import json
import sys
import threading
import urllib.request

WORDS = ["file", "socket", "module", "package", "thread", "server", "function", "class",
         "string", "list", "dictionary", "error", "pipe", "signal", "process", "buffer"]


def prompt(i):
    # Words by i's digits in base 16, so every prompt is distinct and lengths vary from 2 to 6.
    words = [WORDS[(i >> (4 * k)) % 16] for k in range(1 + i % 5)]
    return "To open a %s, use the %s" % (WORDS[i % 16], " ".join(words))


def complete(url, text, max_tokens, out, i):
    body = {"model": "default-model", "prompt": text, "max_tokens": max_tokens,
            "temperature": 0, "ignore_eos": True}
    req = urllib.request.Request(url + "/v1/completions", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    try:
        out[i] = json.load(urllib.request.urlopen(req, timeout=240))["choices"][0]["text"]
    except Exception as e:  # noqa: BLE001 - any failure is reported, not raised
        print("request %d (%r): %s" % (i, text, e), file=sys.stderr)


def main():
    url, n, max_tokens = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    out = [None] * n
    threads = [threading.Thread(target=complete, args=(url, prompt(i), max_tokens, out, i))
               for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
