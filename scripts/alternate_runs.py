#!/usr/bin/env python3
"""Two settings of a bench, run in alternated pairs, side by side.

On a noisy machine two runs of the same code differ by more than most changes do, and the noise
drifts over minutes. Alternating the settings, with the order turned round every other pair
(A B, B A, A B, ...), spreads that drift over both. Each run gets --json; the figures are read
from its JSON by dotted path. Prints every pair, then the mean and range of each setting and in
how many pairs A came out lower.

    scripts/alternate_runs.py --pairs 6 --figure migration.local_median_during_over_control \\
        build/brigade \\
        "bench balance --windows 20 --layers 2 --migrations 100 --move-fraction 0" \\
        "bench balance --windows 20 --layers 2 --migrations 100"
"""
import argparse
import json
import shlex
import statistics
import subprocess
import sys


def figure(doc, path):
    for key in path.split("."):
        doc = doc[int(key)] if isinstance(doc, list) else doc[key]
    return doc


def run(binary, args, figures):
    done = subprocess.run([binary] + shlex.split(args) + ["--json"], capture_output=True,
                          text=True)
    if done.returncode != 0:
        sys.exit(f"{binary} {args} failed ({done.returncode}):\n{done.stderr.strip()}")
    doc = json.loads(done.stdout)
    try:
        return [float(figure(doc, f)) for f in figures]
    except (KeyError, IndexError, ValueError, TypeError) as e:
        sys.exit(f"{binary} {args}: no figure {e} in its JSON; the top-level keys are "
                 f"{', '.join(doc)}")


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=6)
    parser.add_argument("--figure", action="append", required=True,
                        help="dotted path into the JSON, e.g. migration.local_p99_during; repeat "
                             "for more")
    parser.add_argument("binary")
    parser.add_argument("a", help="arguments of setting A")
    parser.add_argument("b", help="arguments of setting B")
    o = parser.parse_args()
    if o.pairs < 1:
        parser.error("--pairs must be at least 1")
    results = {"A": [], "B": []}
    for pair in range(o.pairs):
        order = ("A", "B") if pair % 2 == 0 else ("B", "A")
        for setting in order:
            print(f"pair {pair + 1}/{o.pairs}: {setting} ...", file=sys.stderr, flush=True)
            results[setting].append(run(o.binary, o.a if setting == "A" else o.b, o.figure))
    print(f"A: {o.a}\nB: {o.b}\n")
    for i, name in enumerate(o.figure):
        a = [r[i] for r in results["A"]]
        b = [r[i] for r in results["B"]]
        print(f"{name}\n{'pair':>6} {'A':>10} {'B':>10} {'B / A':>8}")
        for p in range(o.pairs):
            ratio = f"{b[p] / a[p]:8.4f}" if a[p] else f"{'-':>8}"
            print(f"{p + 1:>6} {a[p]:10.4f} {b[p]:10.4f} {ratio}")
        print(f"{'mean':>6} {statistics.mean(a):10.4f} {statistics.mean(b):10.4f}")
        print(f"{'range':>6} {min(a):.4f}-{max(a):.4f} {min(b):.4f}-{max(b):.4f}")
        print(f"A lower in {sum(x < y for x, y in zip(a, b))} of {o.pairs} pairs\n")


if __name__ == "__main__":
    main()
