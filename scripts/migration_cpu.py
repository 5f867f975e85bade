#!/usr/bin/env python3
"""How much CPU live migrations cost, process by process.

Runs `brigade bench balance --migration-nodes` (extra arguments are passed on), samples the CPU
time of every thread of every brigade process from /proc every 50 ms while it runs, and splits
it between the migration windows (read from the supervisor's "layout epoch N adopted ... in S s"
log lines) and the time between them. Prints the share of a core each process used in both.

    scripts/migration_cpu.py build/brigade --migrations 30 --windows 20 --layers 2
"""
import collections
import datetime
import os
import re
import subprocess
import sys
import tempfile
import time

ADOPTED = re.compile(r"(\d\d):(\d\d):(\d\d\.\d+) info\s+\[supervisor\] layout epoch \d+ adopted: "
                     r"\d+ slots moved in ([\d.]+) s")


def brigade_threads():
    """{(process role, tid): CPU ticks} for every thread of every brigade process."""
    out = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            argv = open(f"/proc/{pid}/cmdline", "rb").read().decode().split("\0")
            if not (argv[0].endswith("brigade") or argv[0] == "/proc/self/exe"):
                continue
            role = argv[1] + (" " + argv[argv.index("--name") + 1] if "--name" in argv else "")
            for tid in os.listdir(f"/proc/{pid}/task"):
                stat = open(f"/proc/{pid}/task/{tid}/stat").read()
                fields = stat[stat.rindex(")") + 2:].split()
                out[(role, tid)] = int(fields[11]) + int(fields[12])  # utime + stime
        except (OSError, ValueError, IndexError):
            continue  # a process or thread that ended while being read
    return out


def migration_windows(log_text):
    midnight = datetime.datetime.now(datetime.timezone.utc).replace(
        hour=0, minute=0, second=0, microsecond=0).timestamp()
    windows = []
    for m in ADOPTED.finditer(log_text):
        end = midnight + int(m[1]) * 3600 + int(m[2]) * 60 + float(m[3])
        windows.append((end - float(m[4]), end))
    return windows


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    samples = []  # (time, {(role, tid): ticks})
    with tempfile.TemporaryFile("w+") as log:
        bench = subprocess.Popen([sys.argv[1], "bench", "balance", "--migration-nodes", "--json"]
                                 + sys.argv[2:], stdout=subprocess.DEVNULL, stderr=log)
        while bench.poll() is None:
            samples.append((time.time(), brigade_threads()))
            time.sleep(0.05)
        log.seek(0)
        log_text = log.read()
    windows = migration_windows(log_text)
    if not windows:
        sys.exit("no migration finished in the bench's log (exit code %d; --migrations must be "
                 "above 0); its last lines:\n%s" % (bench.returncode, log_text[-2000:]))
    first, last = windows[0][0], windows[-1][1]
    inside = sum(b - a for a, b in windows)
    outside = (last - first) - inside
    ticks = collections.defaultdict(lambda: [0, 0])  # role -> [during, between]
    for (t0, s0), (t1, s1) in zip(samples, samples[1:]):
        mid = (t0 + t1) / 2
        if not first <= mid <= last:
            continue
        during = any(a <= mid <= b for a, b in windows)
        for key, k1 in s1.items():
            ticks[key[0]][0 if during else 1] += k1 - s0.get(key, k1)
    hz = os.sysconf("SC_CLK_TCK")
    print(f"{len(windows)} migrations: {inside:.1f} s during, {outside:.1f} s between")
    print(f"{'process':<24} {'% of a core during':>20} {'between':>10}")
    totals = [0.0, 0.0]
    for role, (d, b) in sorted(ticks.items()):
        during, between = 100 * d / hz / inside, 100 * b / hz / outside
        totals[0] += during
        totals[1] += between
        print(f"{role:<24} {during:>20.1f} {between:>10.1f}")
    print(f"{'all':<24} {totals[0]:>20.1f} {totals[1]:>10.1f}")


if __name__ == "__main__":
    main()
