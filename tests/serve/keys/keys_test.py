#!/usr/bin/env python3
"""API keys, cache salts and admin keys through a real `brigade serve --engine`: the start line
says which admin rule applies, and the server keeps to it. Without any key, /v1/admin/* is open
on loopback, refused (403) on 0.0.0.0, and open there when the manifest sets
serve.admin_without_key. With admin keys, only they open it (an API key gets 403); with API keys
alone, any API key does. Keys bound to a cache salt in the manifest are accepted, a bad
`cache_salt` is a 400 naming it, and bad key entries stop the server at start naming the field.

Usage: keys_test.py BRIGADE_BIN WORKDIR
"""
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "support"))
from brigade_server import make_small_model  # noqa: E402


class server:
    """`brigade serve MANIFEST --engine --listen HOST:0 [ARGS]`: its start lines and its port."""

    def __init__(self, brigade, manifest, host, args, log_path):
        self.log = open(log_path, "w")
        self.proc = subprocess.Popen([brigade, "serve", manifest, "--engine", "--listen",
                                      f"{host}:0"] + args, stdout=subprocess.PIPE,
                                     stderr=self.log, text=True)
        self.lines, self.port = [], None
        deadline = time.time() + 120
        while time.time() < deadline and len(self.lines) < 2:
            line = self.proc.stdout.readline()
            if not line:
                break
            self.lines.append(line.strip())
            if " at http://" in line:
                self.port = int(line.split(" at http://")[1].split()[0].rsplit(":", 1)[1])
        if self.port is None or len(self.lines) < 2:
            self.stop()
            raise RuntimeError(f"brigade serve did not start: {self.lines}; see {log_path}")
        self.admin_line = self.lines[1]

    def call(self, path, body, key=None):
        """(status, JSON body) of a POST, over loopback whatever the server listens on."""
        headers = {"Content-Type": "application/json"}
        if key:
            headers["Authorization"] = f"Bearer {key}"
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}",
                                     data=json.dumps(body).encode(), headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.log.close()


class checker:
    def __init__(self):
        self.failures = []

    def expect(self, ok, what):
        print(("ok   " if ok else "FAIL ") + what)
        if not ok:
            self.failures.append(what)


COMPLETION = {"model": "keys-model", "prompt": "Hi", "max_tokens": 2}


def run_case(brigade, workdir, check, name, manifest_extra, host, args, admin_line, admin):
    """Starts a server and checks its admin line and the admin answers: `admin` maps a key
    (None: no header) to the status /v1/admin/kill {} must get (400 = past the gate)."""
    manifest = os.path.join(workdir, f"{name}.yaml")
    with open(manifest, "w") as f:
        f.write(f"model: {os.path.join(workdir, 'model')}\n"
                f"serve: {{model_name: keys-model{manifest_extra}}}\n")
    srv = server(brigade, manifest, host, args, os.path.join(workdir, f"{name}.log"))
    try:
        check.expect(admin_line in srv.admin_line,
                     f"{name}: the start line says '{admin_line}' ({srv.admin_line})")
        for key, status in admin.items():
            for path in ["/v1/admin/kill", "/v1/admin/faults"]:
                got, body = srv.call(path, {}, key)
                check.expect(got == status, f"{name}: {path} with key {key} answers {status} "
                                            f"(got {got}: {body['error']['message']})")
        return srv
    except Exception:
        srv.stop()
        raise


def check_refusals(check, srv, name):
    """A bad cache_salt is a 400 naming it; a good one, with a bound key, is answered."""
    for salt in ["", 5, "s" * 257]:
        got, body = srv.call("/v1/completions", dict(COMPLETION, cache_salt=salt), "tenant-a-key")
        check.expect(got == 400 and body["error"]["param"] == "cache_salt",
                     f"{name}: cache_salt {str(salt)[:8]!r} is a 400 naming cache_salt "
                     f"(got {got} {body['error'].get('param')})")
    for key in ["tenant-a-key", "plain", "root"]:
        got, _ = srv.call("/v1/completions", dict(COMPLETION, cache_salt="x"), key)
        check.expect(got == 200, f"{name}: a completion with key {key} and a cache_salt is "
                                 f"answered (got {got})")
    got, _ = srv.call("/v1/completions", COMPLETION)
    check.expect(got == 401, f"{name}: a completion without a key is a 401 (got {got})")


def check_start_errors(brigade, workdir, check):
    bad = os.path.join(workdir, "bad.yaml")
    with open(bad, "w") as f:
        f.write(f"model: {os.path.join(workdir, 'model')}\n"
                "serve: {api_keys: [{key: k, cache_salt: [x]}]}\n")
    run = subprocess.run([brigade, "serve", bad, "--engine", "--listen", "127.0.0.1:0"],
                         capture_output=True, text=True, timeout=60)
    check.expect(run.returncode != 0 and "'serve.api_keys[0].cache_salt'" in run.stderr,
                 f"a bad bound salt stops the server naming the field ({run.stderr.strip()})")
    run = subprocess.run([brigade, "serve", "--model", os.path.join(workdir, "model"), "--engine",
                          "--listen", "127.0.0.1:0", "--api-key", "same", "--admin-key", "same"],
                         capture_output=True, text=True, timeout=60)
    check.expect(run.returncode != 0 and "serve.admin_keys[0]" in run.stderr,
                 f"a key both API and admin key stops the server ({run.stderr.strip()})")


def main():
    brigade, workdir = sys.argv[1:3]
    shutil.rmtree(workdir, ignore_errors=True)
    os.makedirs(workdir)
    make_small_model(brigade, os.path.join(workdir, "model"))
    check = checker()
    cases = [
        ("loopback-no-keys", "", "127.0.0.1", [], "open without a key, on loopback only",
         {None: 400}),
        ("public-no-keys", "", "0.0.0.0", [], "refused", {None: 403}),
        ("public-opt-in", ", admin_without_key: true", "0.0.0.0", [], "manifest opts in",
         {None: 400}),
        ("api-keys-only", "", "127.0.0.1", ["--api-key", "k"], "accept any API key",
         {None: 401, "k": 400}),
        ("admin-keys", ", api_keys: [plain, {key: tenant-a-key, cache_salt: tenant-a}]",
         "0.0.0.0", ["--admin-key", "root"], "protected by admin keys",
         {None: 401, "tenant-a-key": 403, "plain": 403, "root": 400}),
    ]
    for name, extra, host, args, line, admin in cases:
        srv = run_case(brigade, workdir, check, name, extra, host, args, line, admin)
        try:
            if name == "admin-keys":
                check_refusals(check, srv, name)
            else:
                got, _ = srv.call("/v1/completions", COMPLETION, "k" if args else None)
                check.expect(got == 200, f"{name}: an ordinary completion is answered ({got})")
        finally:
            srv.stop()
    check_start_errors(brigade, workdir, check)
    if check.failures:
        print(f"{len(check.failures)} checks failed")
        return 1
    shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
