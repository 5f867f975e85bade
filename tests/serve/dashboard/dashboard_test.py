#!/usr/bin/env python3
"""The dashboard over a live topology: GET /dashboard serves the page without a key, and its own
script, run in node against the server, renders what /v1/experts, /v1/status and /metrics say
(the layout slot for slot, a row per role, the balancedness); behind an API key it says to enter
one, and renders with it. Over the committed pair drafting with its confidence head, its
speculation panel shows each decode worker's drafted, verified and accepted tokens, the acceptance
per draft position and the head's calibration buckets as /v1/status reports them.

Usage: dashboard_test.py BRIGADE_BIN NODE WORKDIR
"""
import json
import os
import shutil
import subprocess
import sys
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "support"))
from brigade_server import brigade_server, write_watched_manifest  # noqa: E402

KEY = "dashboard-test-key"
PAIR = os.path.abspath(os.path.join(HERE, "..", "..", "..", "models", "default"))


def fetch(url, key=None):
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {key}"} if key else {})
    with urllib.request.urlopen(req, timeout=30) as r:
        return r.status, r.headers.get("Content-Type"), r.read().decode()


def page_script(srv, workdir):
    status, content_type, html = fetch(srv.url + "/dashboard")
    assert status == 200 and content_type.startswith("text/html"), (status, content_type)
    script = html.split("<script>")[1].split("</script>")[0]
    path = os.path.join(workdir, "dashboard.js")
    with open(path, "w") as f:
        f.write(script)
    return path


def render(node, script, srv, key=None):
    proc = subprocess.run([node, os.path.join(HERE, "render.mjs"), script, srv.url] +
                          ([key] if key else []), capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        raise RuntimeError(f"the dashboard's script failed in node:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def check(name, ok, detail=""):
    print(f"{'ok  ' if ok else 'FAIL'} {name}{': ' + detail if detail and not ok else ''}")
    return ok


def close(shown, expected):
    """A rendered ratio against the JSON's: within half a unit of the last decimal shown (toFixed
    rounds binary values, so 2.125 may show as 2.12 or 2.13)."""
    if expected is None:
        return shown == "-"
    if shown == "-":
        return False
    decimals = len(shown.split(".")[1]) if "." in shown else 0
    return abs(float(shown) - expected) <= 0.5 * 10 ** -decimals + 1e-9


def ratio(part, whole):
    return part / whole if whole else None


def check_calibration(shown, workers, metrics):
    """The calibration table: buckets summed over the workers, as the status and /metrics say."""
    ok = True
    names = [b["bucket"] for b in workers[0]["calibration"]]
    drafts = [sum(w["calibration"][i]["drafts"] for w in workers) for i in range(len(names))]
    kept = [sum(w["calibration"][i]["kept"] for w in workers) for i in range(len(names))]
    predicted = [sum(w["calibration"][i]["mean_predicted"] * w["calibration"][i]["drafts"]
                     for w in workers) for i in range(len(names))]
    ok &= check("the head judged drafts in at least one bucket", sum(drafts) > 0, str(drafts))
    ok &= check("a calibration row per bucket", [r[0] for r in shown] == names and
                [int(r[1]) for r in shown] == drafts, f"{shown} against {names} {drafts}")
    for row, n, k, p in zip(shown, drafts, kept, predicted):
        if n == 0:
            ok &= check(f"bucket {row[0]} empty", row[2:] == ["-", "-"], str(row))
            continue
        ok &= check(f"bucket {row[0]}: mean predicted and observed",
                    close(row[2], p / n) and close(row[3], k / n),
                    f"{row} against {p / n}, {k / n}")
        ok &= check(f"bucket {row[0]} in /metrics",
                    f'brigade_speculative_calibration_drafts_total{{bucket="{row[0]}"}} {n}\n'
                    in metrics and
                    f'brigade_speculative_calibration_kept_total{{bucket="{row[0]}"}} {k}\n'
                    in metrics, row[0])
    return ok


def check_speculation_panel(brigade, node, workdir):
    """The committed pair drafting with its head: the panel shows what /v1/status says."""
    manifest = os.path.join(workdir, "pair.yaml")
    with open(manifest, "w") as f:
        f.write(f"model: {PAIR}/target\n"
                "roles: {decode: {speculation: "
                f"{{draft: model, draft_model: {PAIR}/draft}}}}}}\n")
    srv = brigade_server(brigade, manifest, os.path.join(workdir, "pair-serve.log"))
    ok = True
    try:
        name = json.loads(fetch(srv.url + "/v1/models")[2])["data"][0]["id"]
        for prompt in ["To open a file, use", "The default value of the argument is",
                       "A list is a sequence of"]:
            srv.post("/v1/completions", {"model": name, "prompt": prompt, "max_tokens": 32,
                                         "temperature": 0})
        script = page_script(srv, workdir)
        shown = render(node, script, srv)
        status = json.loads(fetch(srv.url + "/v1/status")[2])
        metrics = fetch(srv.url + "/metrics")[2]
        decode = [r for r in status if r["detail"].get("speculation")]
        workers = [r["detail"]["speculation"] for r in decode]
        ok &= check("it renders without an error", shown["error"] == "", shown["error"])
        expected = [[r["name"], s["draft"], str(s["proposed_tokens"]), str(s["drafted_tokens"]),
                     str(s["accepted_tokens"])] for r, s in zip(decode, workers)]
        ok &= check("a speculation row per decode worker: drafted, verified, accepted",
                    [row[:5] for row in shown["speculation"]] == expected and
                    all(close(row[5], ratio(s["accepted_tokens"], s["drafted_tokens"])) and
                        close(row[6], ratio(s["drafted_tokens"], s["verify_steps"]))
                        for row, s in zip(shown["speculation"], workers)),
                    f"{shown['speculation']} against {expected}")
        ok &= check("drafts were verified, kept and cut", all(
            s["proposed_tokens"] >= s["drafted_tokens"] > s["accepted_tokens"] > 0
            for s in workers), str(workers))
        width = max(len(s["drafted_by_position"]) for s in workers)
        at = [[sum(s[k][i] for s in workers if i < len(s[k])) for i in range(width)]
              for k in ("drafted_by_position", "accepted_by_position")]
        ok &= check("acceptance per position", [[int(c) for c in row[:3]]
                                                for row in shown["spec_positions"]] ==
                    [[i, at[0][i], at[1][i]] for i in range(width)],
                    f"{shown['spec_positions']} against {at}")
        ok &= check_calibration(shown["calibration"], workers, metrics)
    finally:
        srv.stop()
    return ok


def main():
    brigade, node, workdir = sys.argv[1:4]
    shutil.rmtree(workdir, ignore_errors=True)
    os.makedirs(workdir)
    manifest = write_watched_manifest(brigade, workdir, KEY)
    srv = brigade_server(brigade, manifest, os.path.join(workdir, "serve.log"))
    ok = True
    try:
        # Steps, so that sample windows exist.
        for i in range(4):
            req = urllib.request.Request(
                srv.url + "/v1/completions",
                data=json.dumps({"model": "model", "prompt": [40 + i, 41, 42], "max_tokens": 24,
                                 "temperature": 0, "ignore_eos": True}).encode(),
                headers={"Content-Type": "application/json", "Authorization": f"Bearer {KEY}"})
            urllib.request.urlopen(req, timeout=120).read()
        script = page_script(srv, workdir)
        subprocess.run([node, "--check", script], check=True, timeout=60)

        locked = render(node, script, srv)
        ok &= check("without the key the page says to enter it", "API key" in locked["error"],
                    locked["error"])
        shown = render(node, script, srv, KEY)
        experts = json.loads(fetch(srv.url + "/v1/experts", KEY)[2])
        status = json.loads(fetch(srv.url + "/v1/status", KEY)[2])
        ok &= check("with the key it renders without an error", shown["error"] == "" and
                    shown["updated"] != "", shown["error"])
        phy2log = experts["layout"][0]["phy2log"]
        slots = experts["slots_per_shard"]
        expected_layout = [phy2log[s * slots:(s + 1) * slots] for s in range(experts["shards"])]
        ok &= check("the layout, slot for slot", shown["layout"] == expected_layout,
                    f"{shown['layout']} against {expected_layout}")
        replicas = sum(1 for e in phy2log if phy2log.count(e) > 1)
        ok &= check("replicated experts highlighted", shown["replicas"] == replicas > 0,
                    f"{shown['replicas']} against {replicas}")
        ok &= check("a row per role", sorted(r[0] for r in shown["roles"]) ==
                    sorted(s["name"] for s in status), str(shown["roles"]))
        ok &= check("the balancedness", shown["cards"]["expert balancedness"] ==
                    f"{experts['balancedness']:.3f}", str(shown["cards"]))
        ok &= check("sample windows plotted", len(experts["windows"]) > 0 and
                    shown["history_points"] == len(experts["windows"]) and
                    shown["load_rows"] == experts["shards"],
                    f"{shown['history_points']} points, {shown['load_rows']} load rows, "
                    f"{len(experts['windows'])} windows")
        metrics = fetch(srv.url + "/metrics")[2]
        rates = [float(line.split()[-1]) for line in metrics.splitlines()
                 if line.startswith("brigade_prefix_cache_hit_rate{")]
        ok &= check("the prefix cache hit rate, over every tier", len(rates) > 0 and
                    shown["cards"]["prefix cache hit rate"] == f"{100 * sum(rates):.1f}%",
                    f"{shown['cards']} against {rates}")
        ok &= check("generated tokens counted", shown["cards"]["generated tokens"] == "96",
                    str(shown["cards"]))
        ok &= check("speculation off says so", shown["speculation_note"] == "speculation is off",
                    shown["speculation_note"])
    finally:
        srv.stop()
    ok &= check_speculation_panel(brigade, node, workdir)
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
