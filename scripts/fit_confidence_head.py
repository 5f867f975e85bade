#!/usr/bin/env python3
"""Fits a draft model's confidence head (model/confidence_head.hpp) to recorded verify steps.

Input: the JSON lines `brigade bench speculation --record-events FILE` writes. The first line has
the measured seconds of a verify step per number of drafts (`verify_step_s`, 0 drafts first) and
of one draft forward (`draft_step_s`); every further line is one verify step with a fixed window:
the draft's probability and entropy for each draft, and how many drafts the target kept.

The head is a logistic regression of "draft i kept, given every draft before it was" on
[1, log probability, probability, entropy, index], fitted by Newton's method (IRLS) over the
drafts each step reached. The threshold and the continue threshold are the pair that maximises
the expected tokens per unit of cost over the recorded steps, where a step verifying L drafts
costs a verify step of L drafts plus the draft forwards it took (the first draft the head cuts
is computed too, unless the continue threshold stopped the draft before it), over a plain step.
A step's first draft forward costs what it costs right after a verify step
(`draft_step_after_target_s`: the target's step has pushed the draft's weights out of the
cores' caches), its further ones what they cost back to back (`draft_step_s`), as timed inside
the decode loop.

The thresholds it picks hold at every batch, from costs measured at batch 1 and a simulation of
the steps; `brigade bench speculation --pair-only --tune-head OUT.json` then keeps the weights
and sets the thresholds batch by batch, measured in the decode loop itself.

Usage: scripts/fit_confidence_head.py EVENTS.jsonl OUT.json
"""
import json
import sys

import numpy as np

FEATURES = ["bias", "log_probability", "probability", "entropy", "index"]


def read(path):
    with open(path) as f:
        lines = [json.loads(line) for line in f if line.strip()]
    costs, steps = lines[0], lines[1:]
    if "verify_step_s" not in costs:
        sys.exit(f"{path}: the first line must carry verify_step_s")
    return costs, steps


def design(probability, entropy):
    p = np.maximum(np.asarray(probability, dtype=np.float64), 1e-30)
    e = np.asarray(entropy, dtype=np.float64)
    index = np.arange(len(p), dtype=np.float64)
    return np.stack([np.ones_like(p), np.log(p), p, e, index], axis=1)


def reached(steps):
    """Rows and outcomes of every draft a step reached (all drafts before it were kept)."""
    xs, ys = [], []
    for s in steps:
        x = design(s["probability"], s["entropy"])
        n = min(s["kept"] + 1, len(x))
        xs.append(x[:n])
        ys.append((np.arange(n) < s["kept"]).astype(np.float64))
    return np.concatenate(xs), np.concatenate(ys)


def fit(x, y, ridge=1e-3, iterations=50):
    w = np.zeros(x.shape[1])
    for _ in range(iterations):
        p = 1.0 / (1.0 + np.exp(-x @ w))
        gradient = x.T @ (y - p) - ridge * w
        hessian = (x * (p * (1 - p))[:, None]).T @ x + ridge * np.eye(len(w))
        step = np.linalg.solve(hessian, gradient)
        w += step
        if np.max(np.abs(step)) < 1e-9:
            break
    return w


def draft_cost(costs, computed):
    """What `computed` draft forwards of one step cost."""
    if computed == 0:
        return 0.0
    first = costs.get("draft_step_after_target_s", costs["draft_step_s"])
    return first + (computed - 1) * costs["draft_step_s"]


def policy(cumulative, threshold, continue_threshold):
    """Drafts verified and draft forwards computed for one step's cumulative predictions."""
    computed = 0
    for i, c in enumerate(cumulative):
        if i > 0 and cumulative[i - 1] < continue_threshold:
            return i, computed
        computed += 1
        if c < threshold:
            return i, computed
    return len(cumulative), computed


def speed(w, steps, costs, threshold, continue_threshold=0.0):
    """Tokens per plain-step cost when each step verifies the drafts the head keeps."""
    verify = costs["verify_step_s"]
    tokens = cost = 0.0
    for s in steps:
        x = design(s["probability"], s["entropy"])
        cumulative = np.cumprod(1.0 / (1.0 + np.exp(-x @ w)))
        keep, computed = policy(cumulative, threshold, continue_threshold)
        tokens += 1 + min(s["kept"], keep)
        cost += (verify[min(keep, len(verify) - 1)] + draft_cost(costs, computed)) / verify[0]
    return tokens / cost


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    costs, steps = read(sys.argv[1])
    x, y = reached(steps)
    w = fit(x, y)
    grid = np.round(np.arange(0.05, 0.96, 0.05), 2)
    continues = [0.0] + list(np.round(np.arange(0.60, 0.96, 0.05), 2))
    speeds = {(t, c): speed(w, steps, costs, t, c) for t in grid for c in continues}
    # Pairs within 0.2% of the best are ties (the table is flat where the continue threshold
    # decides); of those the highest thresholds, which verify and compute the fewest drafts.
    best = max(speeds.values())
    threshold, continue_threshold = max(k for k, v in speeds.items() if v >= best - 0.002)
    head = {"weights": dict(zip(FEATURES, map(float, w))), "threshold": float(threshold)}
    if continue_threshold > 0:
        head["continue_threshold"] = float(continue_threshold)
    with open(sys.argv[2], "w") as f:
        json.dump(head, f, indent=2)
        f.write("\n")
    p = 1.0 / (1.0 + np.exp(-x @ w))
    print(f"{len(steps)} steps, {len(y)} reached drafts, {y.mean():.3f} kept; "
          f"a step's first draft forward costs {draft_cost(costs, 1) / costs['verify_step_s'][0]:.2f} "
          f"plain steps, a further one {costs['draft_step_s'] / costs['verify_step_s'][0]:.2f}")
    print("weights:", head["weights"])
    print("tokens per plain-step cost, by threshold (rows) and continue threshold (columns):")
    print("      " + " ".join("  none" if c == 0 else f"{c:6.2f}" for c in continues))
    for t in grid:
        print(f"{t:.2f}  " + " ".join(f"{speeds[(t, c)]:6.3f}" for c in continues))
    print(f"chosen threshold {threshold:.2f}, continue threshold "
          + ("none" if continue_threshold == 0 else f"{continue_threshold:.2f}"))
    print("calibration (fitting drafts): bucket, drafts, predicted, observed")
    for b in range(10):
        m = (p >= b / 10) & (p < (b + 1) / 10 if b < 9 else p <= 1)
        if m.any():
            bucket = f"{b / 10:.1f}-{(b + 1) / 10:.1f}"
            print(f"  {bucket} {m.sum():6d} {p[m].mean():.3f} {y[m].mean():.3f}")


if __name__ == "__main__":
    main()
