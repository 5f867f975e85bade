#!/usr/bin/env python3
"""The dashboard in a real browser: Debian's headless Chromium, driven by playwright-core
(browser_test.mjs), against `brigade serve` with an API key on a small generated model and four
expert shards. The page must ask for the key, render /v1/experts slot for slot, and follow a
re-plan live; screenshots (locked, idle, before-replan, after-replan .png) stay in WORKDIR.

playwright-core is pinned in browser/package-lock.json and installed with `npm ci` into NPM_DIR
once per lockfile (a stamp records the lock that last installed), as the openai node test does.

Usage: browser_test.py BRIGADE_BIN NODE NPM NPM_DIR WORKDIR
"""
import filecmp
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "support"))
from brigade_server import brigade_server, write_watched_manifest  # noqa: E402

KEY = "dashboard-browser-key"
CHROMIUM = os.environ.get("BRIGADE_CHROMIUM", "/usr/bin/chromium")


def fail(message):
    print(f"serve_dashboard_browser: {message}", file=sys.stderr)
    return 1


def install(npm, npm_dir):
    """npm ci of the pinned playwright-core into npm_dir, unless this lockfile installed it."""
    src = os.path.join(HERE, "browser")
    lock = os.path.join(src, "package-lock.json")
    stamp = os.path.join(npm_dir, ".installed-lock.json")
    os.makedirs(npm_dir, exist_ok=True)
    if os.path.exists(stamp) and filecmp.cmp(lock, stamp, shallow=False):
        return True
    for name in ("package.json", "package-lock.json"):
        shutil.copy(os.path.join(src, name), npm_dir)
    if subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=npm_dir).returncode != 0:
        print(f"serve_dashboard_browser: 'npm ci' failed in {npm_dir}.\n"
              "  The test installs playwright-core from the npm registry; check that the registry\n"
              "  is reachable (npm ping) and that npm's proxy settings are right, then rerun.",
              file=sys.stderr)
        return False
    shutil.copy(lock, stamp)
    return True


def main():
    brigade, node, npm, npm_dir, workdir = sys.argv[1:6]
    for what, path in (("chromium", CHROMIUM), ("node", node), ("npm", npm)):
        if not (os.path.isfile(path) and os.access(path, os.X_OK)) and not shutil.which(path):
            return fail(f"needs {what} ({path} is missing): run scripts/install-deps.sh")
    if not install(npm, npm_dir):
        return 1
    shutil.rmtree(workdir, ignore_errors=True)
    os.makedirs(workdir)
    manifest = write_watched_manifest(brigade, workdir, KEY)
    # ES modules resolve packages from the importing file's folder, so the script runs from there.
    shutil.copy(os.path.join(HERE, "browser_test.mjs"), npm_dir)
    started = time.time()
    srv = brigade_server(brigade, manifest, os.path.join(workdir, "serve.log"))
    try:
        env = dict(os.environ, BASE=srv.url, KEY=KEY, WORK=workdir, CHROMIUM=CHROMIUM)
        rc = subprocess.run([node, "browser_test.mjs"], cwd=npm_dir, env=env,
                            timeout=400).returncode
    finally:
        srv.stop()
    print(f"{'PASS' if rc == 0 else 'FAIL'} ({time.time() - started:.1f} s with the server; "
          f"screenshots and serve.log in {workdir})")
    return rc


if __name__ == "__main__":
    sys.exit(main())
