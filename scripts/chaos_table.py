#!/usr/bin/env python3
"""Turns `brigade chaos --json` output into the markdown tables of docs/chaos.md: one row per
named scenario, and one summary row per random seed.

Usage: chaos_table.py REPORT.json [REPORT.json ...]
"""
import json
import sys


def faults_cell(run, key):
    values = [f[key] for f in run["faults"] if f.get(key, -1) >= 0]
    return " / ".join(str(v) for v in values) if values else "-"


def pct(block):
    return f"{block['p50_ms']:.0f}/{block['p99_ms']:.0f}" if block["samples"] else "-"


def main():
    named, random_runs = [], {}
    for path in sys.argv[1:]:
        with open(path) as f:
            report = json.load(f)
        for run in report["runs"]:
            if run["scenario"].startswith("random-"):
                random_runs.setdefault(run["seed"], []).append(run)
            else:
                named.append(run)
    if named:
        print("| scenario | requests | completed | errors | lost | dup | diverged | detect ms |"
              " serve again ms | TTFT recovery | TTFT outside | TPOT recovery | TPOT outside |"
              " KV pools | result |")
        print("|---|---:|---:|---:|---:|---:|---:|---|---|---|---|---|---|---|---|")
        for r in named:
            print(f"| {r['scenario']} | {r['requests']} | {r['completed']} | {r['errors']} |"
                  f" {r['lost']} | {r['duplicated']} | {r['diverged']} |"
                  f" {faults_cell(r, 'detect_ms')} | {faults_cell(r, 'serve_again_ms')} |"
                  f" {pct(r['ttft_recovery'])} | {pct(r['ttft_outside'])} |"
                  f" {pct(r['tpot_recovery'])} | {pct(r['tpot_outside'])} |"
                  f" {r['kv_pools_checked']} ok | {'pass' if r['passed'] else 'FAIL'} |")
        print()
    if random_runs:
        print("| random runs | seed | requests | completed | errors | lost | dup | diverged |"
              " worst detect ms | worst serve again ms | failed runs |")
        print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for seed, runs in sorted(random_runs.items()):
            total = {k: sum(r[k] for r in runs)
                     for k in ["requests", "completed", "errors", "lost", "duplicated",
                               "diverged"]}
            detect = max((f["detect_ms"] for r in runs for f in r["faults"]), default=-1)
            again = max((f["serve_again_ms"] for r in runs for f in r["faults"]), default=-1)
            failed = sum(0 if r["passed"] else 1 for r in runs)
            print(f"| {len(runs)} | {seed} | {total['requests']} | {total['completed']} |"
                  f" {total['errors']} | {total['lost']} | {total['duplicated']} |"
                  f" {total['diverged']} | {detect} | {again} | {failed} |")


if __name__ == "__main__":
    main()
