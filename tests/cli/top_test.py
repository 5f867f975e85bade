#!/usr/bin/env python3
"""`brigade top` under a pseudo-terminal, against a live topology with four expert shards behind
an API key: without the key its frame says to pass --api-key; with it, after some completions
and a POST /v1/admin/replan {"seed": 5}, its frames hold a row per role, a load bar per shard, a
balancedness sparkline and the migration's events, redrawn in place with the cursor hidden and
shown again at the end. q and Ctrl-C end it; an unreachable server is reported in the frame.

Usage: top_test.py BRIGADE_BIN WORKDIR
"""
import errno
import fcntl
import json
import os
import re
import select
import shutil
import signal
import struct
import sys
import termios
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
from brigade_server import brigade_server, write_watched_manifest  # noqa: E402

KEY = "top-test-key"
SHARDS = 4
COLUMNS, ROWS = 120, 60
HIDE, SHOW, HOME = "\x1b[?25l", "\x1b[?25h", "\x1b[H"
BLOCKS = "▏▎▍▌▋▊▉█"
SPARKS = "▁▂▃▄▅▆▇█"


def call(srv, method, path, body=None):
    req = urllib.request.Request(srv.url + path, method=method,
                                 data=json.dumps(body).encode() if body is not None else None,
                                 headers={"Content-Type": "application/json",
                                          "Authorization": f"Bearer {KEY}"})
    with urllib.request.urlopen(req, timeout=120) as r:
        return json.loads(r.read())


def complete(srv, first_token):
    call(srv, "POST", "/v1/completions",
         {"model": "model", "prompt": [first_token, 41, 42], "max_tokens": 24, "temperature": 0,
          "ignore_eos": True})


class top_run:
    """`brigade top ARGS` on a pseudo-terminal of COLUMNS x ROWS; read() collects its output."""

    def __init__(self, brigade, args):
        self.pid, self.fd = os.forkpty()
        if self.pid == 0:
            fcntl.ioctl(1, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLUMNS, 0, 0))
            os.execv(brigade, [brigade, "top"] + args)
        self.raw = b""
        self.rc = None

    def read(self, until, timeout_s):
        """Reads until until(text) holds or the program exits; the text so far."""
        deadline = time.time() + timeout_s
        while time.time() < deadline and not until(self.text()):
            ready, _, _ = select.select([self.fd], [], [], 0.2)
            if not ready:
                continue
            try:
                chunk = os.read(self.fd, 65536)
            except OSError as e:  # EIO: the program exited and the pty closed.
                if e.errno != errno.EIO:
                    raise
                break
            if not chunk:
                break
            self.raw += chunk
        return self.text()

    def text(self):
        return self.raw.decode("utf-8", errors="replace")

    def send(self, data):
        os.write(self.fd, data)

    def wait(self, timeout_s):
        """The exit status once it ended, or None (then it is killed)."""
        self.read(lambda _: False, timeout_s)
        deadline = time.time() + timeout_s
        while time.time() < deadline:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                os.close(self.fd)
                self.rc = os.waitstatus_to_exitcode(status)
                return self.rc
            time.sleep(0.05)
        os.kill(self.pid, signal.SIGKILL)
        os.waitpid(self.pid, 0)
        os.close(self.fd)
        return None


def flat(text):
    """The text with the frame's lines joined by spaces, as wrapped messages were before."""
    return re.sub(r"\x1b\[K\r*\n", " ", text)


def frames(text):
    """Each frame's lines, without the escapes that clear behind them."""
    out = []
    for chunk in text.split(HOME)[1:]:
        chunk = chunk.split("\x1b[J")[0]
        # top ends lines with CR LF, which the terminal's output processing may turn into CR CR LF.
        out.append([line.replace("\x1b[K", "") for line in chunk.replace("\r", "").split("\n")])
    return out


def check(name, ok, detail=""):
    print(f"{'ok  ' if ok else 'FAIL'} {name}{': ' + detail if detail and not ok else ''}")
    return ok


def check_frame(frame, status, experts):
    ok = True
    text = "\n".join(frame)
    ok &= check("frame 3 is the last", "frame 3" in frame[0], frame[0])
    ok &= check("no line wider than the terminal", all(len(line) <= COLUMNS for line in frame))
    missing = [s["name"] for s in status if not any(line.startswith(s["name"] + " ")
                                                    for line in frame)]
    ok &= check("a row per role", len(status) > 0 and not missing, f"missing {missing}")
    bars = [line for line in frame if re.match(r"shard \d+ ", line)]
    ok &= check("a load bar per shard", len(bars) == experts["shards"] == SHARDS and
                any(c in "".join(bars) for c in BLOCKS), "\n".join(bars))
    ok &= check("the most loaded shard marked", sum(line.endswith(" max") for line in bars) >= 1)
    spark = [line for line in frame if line.startswith("BALANCEDNESS")]
    shape = re.match(f"BALANCEDNESS  ([{SPARKS}]+)(  .* last of (\\d+) windows .*)$",
                     spark[0]) if spark else None
    points = len(shape.group(1)) if shape else 0
    windows = len(experts["windows"])
    # A point per window, the most recent ones where more windows closed than the line has
    # room for (a run on a fast machine closes more before the migration ends).
    room = COLUMNS - len("BALANCEDNESS  ") - (len(shape.group(2)) if shape else 0)
    ok &= check("a balancedness sparkline, a point per window that fits",
                shape is not None and points >= 2 and points == min(windows, room) and
                int(shape.group(3)) == windows, f"{spark} for {windows} windows, room {room}")
    ok &= check("the replan's events", "migration_started" in text and
                re.search(r"migration_started\s+epoch \d+", text) is not None, text)
    return ok


def start_server(brigade, workdir):
    manifest = write_watched_manifest(brigade, workdir, KEY, SHARDS)
    return brigade_server(brigade, manifest, os.path.join(workdir, "serve.log"))


def drive(srv):
    """Steps so that sample windows close, then a migration to a random layout, run to its end."""
    for i in range(4):
        complete(srv, 40 + i)
    call(srv, "POST", "/v1/admin/replan", {"seed": 5})
    deadline = time.time() + 120
    i = 0
    while time.time() < deadline:
        experts = call(srv, "GET", "/v1/experts")
        if experts["migration"] is None and experts["epoch"] > 0:
            # Windows on the new layout too, for a sparkline of several points.
            for j in range(4):
                complete(srv, 60 + j)
            return call(srv, "GET", "/v1/experts")
        complete(srv, 50 + i % 8)
        i += 1
    raise RuntimeError("the migration of the replan did not finish in 120 s")


def test_exits(brigade, url):
    """q and Ctrl-C end top at once, the cursor shown again."""
    ok = True
    for key, name in ((b"q", "q"), (b"\x03", "Ctrl-C")):
        run = top_run(brigade, ["--url", url, "--api-key", KEY, "--interval-ms", "200"])
        run.read(lambda t: "\x1b[J" in t, 30)
        start = time.time()
        run.send(key)
        rc = run.wait(10)
        ok &= check(f"{name} ends top", rc == 0 and time.time() - start < 5, f"exit {rc}")
        ok &= check(f"{name} shows the cursor again", run.text().rstrip().endswith(SHOW),
                    repr(run.text()[-80:]))
    return ok


def main():
    brigade, workdir = sys.argv[1:3]
    shutil.rmtree(workdir, ignore_errors=True)
    os.makedirs(workdir)
    ok = True
    run = top_run(brigade, ["--url", "http://127.0.0.1:1", "--frames", "1"])
    rc = run.wait(30)
    ok &= check("an unreachable server is reported with what to do",
                rc == 0 and "no answer from http://127.0.0.1:1" in flat(run.text()) and
                "brigade serve running there" in flat(run.text()), repr(run.text()))
    srv = start_server(brigade, workdir)
    try:
        experts = drive(srv)
        status = call(srv, "GET", "/v1/status")
        run = top_run(brigade, ["--url", srv.url, "--frames", "1"])
        rc = run.wait(60)
        text = flat(run.text())
        ok &= check("without the key the frame says to pass --api-key",
                    rc == 0 and "needs an API key" in text and "--api-key KEY" in text,
                    repr(run.text()))

        run = top_run(brigade, ["--url", srv.url, "--api-key", KEY, "--frames", "3",
                                "--interval-ms", "400"])
        rc = run.wait(60)
        shown = frames(run.text())
        ok &= check("three frames drawn in place", rc == 0 and len(shown) == 3,
                    f"exit {rc}, {len(shown)} frames")
        ok &= check("the cursor hidden, then shown again", run.text().startswith(HIDE) and
                    run.text().rstrip().endswith(SHOW), repr(run.text()[:40]))
        if shown:
            print("the last frame:\n" + "\n".join(shown[-1]))
            ok &= check_frame(shown[-1], status, experts)
        ok &= test_exits(brigade, srv.url)
    finally:
        srv.stop()
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
