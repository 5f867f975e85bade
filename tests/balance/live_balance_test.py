#!/usr/bin/env python3
"""The expert balancing chain end to end on a live topology, with windows and re-plans scaled
down: `brigade bench balance --live --json` drives a skewed, drifting workload (prompts chosen by
the experts their tokens route to) through the embedded default model's topology. Each link must
hold:
- the shards' load samples reach the rebalancer: windows close, every shard counted in each;
- a plan computed from them is adopted: a plan_adopted event with its predicted balancedness
  above the balancedness measured before it;
- the slots move within the budget: at most 25% of each layer's slots per plan;
- the balancedness measured on the windows after the plan rises;
- the workers' choice of replica levels the shards beyond the layout's even split;
- every answer is the engine's, token for token.
The before and after figures are printed.

Usage: live_balance_test.py BRIGADE_BIN
"""
import json
import subprocess
import sys

LAYERS = 4  # the embedded default model's MoE layers


def main():
    brigade = sys.argv[1]
    out = subprocess.run([brigade, "bench", "balance", "--live", "--json"], capture_output=True,
                         text=True, timeout=600)
    if out.returncode not in (0, 1) or not out.stdout.strip():
        print(out.stderr)
        print("FAIL: bench balance --live did not run")
        return 1
    live = json.loads(out.stdout.strip().splitlines()[-1])["live"]
    ok = True

    def check(name, cond, detail=""):
        nonlocal ok
        print(f"{'ok  ' if cond else 'FAIL'} {name}{': ' + str(detail) if detail and not cond else ''}")
        ok &= bool(cond)

    windows = live["windows"]
    shards = live["shards"]
    check("load samples reach the rebalancer: windows closed", len(windows) >= 10, len(windows))
    check("every shard counted tokens in every window",
          all(len(w["shard_counted"]) == shards and all(x > 0 for x in w["shard_counted"])
              for w in windows), windows[:2])
    before = live["phase0_before"]
    after = live["phase0_after"]
    plans = live["adopted_plans"]
    check("a plan computed from the samples was adopted", len(plans) >= 1, live.get("migrations"))
    if plans:
        check("the adopted plan predicted a better balance than the windows before it measured",
              plans[0]["predicted_balancedness"] > before["balancedness"],
              (plans[0], before))
    slots = shards * live["slots_per_shard"]
    check("each plan moved at most a quarter of each layer's slots",
          all(p["moved_slots"] <= 0.25 * slots * LAYERS for p in plans),
          [p["moved_slots"] for p in plans])
    check("the balancedness measured after the plan rises",
          after["windows"] > 0 and after["balancedness"] > before["balancedness"] + 0.05,
          (before, after))
    check("the busiest shard's excess over the mean falls",
          after["max_over_mean"] < before["max_over_mean"], (before, after))
    # Workers send a replicated expert's rows to the replica on their least loaded shard
    # (eplb/replica_dispatch): what the shards counted is more level than the even split the
    # layout's own figure assumes (shard_load). An even split by row index never is.
    settled = [w for w in windows if w.get("epoch", 0) > 0]

    def mom(loads):
        return max(loads) * len(loads) / sum(loads) if sum(loads) > 0 else 1.0

    counted = sum(mom(w["shard_counted"]) for w in settled) / max(1, len(settled))
    even = sum(mom(w["shard_load"]) for w in settled) / max(1, len(settled))
    check("the workers' replica choices level the shards beyond the layout's even split",
          settled and counted < even, (counted, even))
    check("every answer equals the engine's, token for token",
          live["answers"] > 0 and live["mismatches"] == 0 and live["failures"] == 0,
          (live["answers"], live["mismatches"], live["failures"], live["first_failure"]))
    print(f"  skewed workload: expert max/mean {live['expert_skew'][0]:.2f}, then "
          f"{live['expert_skew'][1]:.2f}")
    print(f"  before the first plan: balancedness {before['balancedness']:.3f}, shard max/mean "
          f"{before['max_over_mean']:.3f} over {before['windows']} windows")
    print(f"  after it:              balancedness {after['balancedness']:.3f}, shard max/mean "
          f"{after['max_over_mean']:.3f} over {after['windows']} windows")
    print(f"  after the first plan, shard max/mean counted {counted:.3f} against {even:.3f} "
          f"with the layout's even split")
    print(f"  plans adopted: {len(plans)}, slots moved {[p['moved_slots'] for p in plans]} of "
          f"{slots * LAYERS}; answers {live['answers']}, all the engine's: "
          f"{live['mismatches'] == 0}")
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
