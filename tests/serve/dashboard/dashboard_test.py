#!/usr/bin/env python3
"""The dashboard over a live topology: GET /dashboard serves the page without a key, and its own
script, run in node against the server, renders what /v1/experts, /v1/status and /metrics say
(the layout slot for slot, a row per role, the balancedness); behind an API key it says to enter
one, and renders with it.

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
    finally:
        srv.stop()
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
