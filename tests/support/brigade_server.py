"""`brigade serve MANIFEST` on a free port, driven over HTTP, and the small model it serves:
shared by the Python tests that start a whole topology (tests/topology, tests/cluster,
tests/serve/dashboard)."""
import json
import os
import subprocess
import time
import urllib.request


# deepseek_v3's own shape flags: latent attention with a low-rank query, 4 expert groups of which
# 2 are kept, one shared expert, a dense first layer (so 3 layers keep 2 of experts).
DEEPSEEK_FLAGS = ["--layers", "3", "--q-lora-rank", "24", "--kv-lora-rank", "16",
                  "--qk-nope-head-dim", "16", "--qk-rope-head-dim", "8", "--v-head-dim", "16",
                  "--groups", "4", "--top-groups", "2", "--first-dense", "1", "--inter", "128"]


def make_small_model(brigade, out_dir, family="qwen3_moe"):
    """A small random checkpoint (8 experts, top-2) in out_dir: qwen3_moe with 2 layers, or
    deepseek_v3 with the shape above."""
    extra = DEEPSEEK_FLAGS if family == "deepseek_v3" else ["--layers", "2"]
    subprocess.run([brigade, "make-model", "--family", family, "--out", out_dir, "--hidden", "64",
                    "--heads", "4", "--kv-heads", "2", "--head-dim", "16", "--experts", "8",
                    "--top-k", "2", "--moe-inter", "32", "--seed", "3"] + extra,
                   check=True, capture_output=True)


def write_watched_manifest(brigade, workdir, api_key, shards=4):
    """The small model in WORKDIR/model, served behind `api_key` with `shards` expert shards of 3
    slots, a load sample every 4 steps and no automatic re-plan (a test asks for one): what the
    dashboard and `brigade top` tests watch. Returns the manifest's path."""
    model = os.path.join(workdir, "model")
    make_small_model(brigade, model)
    manifest = os.path.join(workdir, "manifest.yaml")
    with open(manifest, "w") as f:
        f.write(f"model: {model}\n"
                f"serve: {{api_keys: [{api_key}]}}\n"
                f"roles: {{expert_shard: {{count: {shards}, slots_per_shard: 3}}}}\n"
                f"eplb: {{sample_interval_steps: 4, replan_interval_steps: 1000000}}\n")
    return manifest


class brigade_server:
    """Starts `brigade serve MANIFEST --listen 127.0.0.1:0 [EXTRA_ARGS]`; stop() ends it with
    SIGTERM."""

    def __init__(self, brigade, manifest, log_path, start_timeout_s=120, extra_args=()):
        self.log = open(log_path, "w")
        self.proc = subprocess.Popen([brigade, "serve", manifest, "--listen", "127.0.0.1:0"] +
                                     list(extra_args),
                                     stdout=subprocess.PIPE, stderr=self.log, text=True)
        deadline = time.time() + start_timeout_s
        self.url = None
        while time.time() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            if " at http://" in line:
                self.url = line.split(" at ")[1].split()[0]
                break
        if not self.url:
            self.stop()
            raise RuntimeError(f"brigade serve did not start; see {log_path}")

    def post(self, path, body, timeout=180):
        req = urllib.request.Request(self.url + path, data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return json.loads(r.read())

    def get(self, path):
        with urllib.request.urlopen(self.url + path, timeout=30) as r:
            return json.loads(r.read())

    def metric(self, name):
        """The value of an unlabelled metric in /metrics, or None when it is absent."""
        with urllib.request.urlopen(self.url + "/metrics", timeout=30) as r:
            for line in r.read().decode().splitlines():
                if line.startswith(name + " "):
                    return float(line.split()[1])
        return None

    def actors(self):
        """The registry, by actor name."""
        return {a["name"]: a for a in self.get("/v1/actors")["actors"]}

    def stream(self, body, on_third_chunk=None, timeout=180):
        """Streams a completion; returns the concatenated text. Calls on_third_chunk() once the
        third chunk arrived (fault injection mid-stream)."""
        body = dict(body, stream=True)
        req = urllib.request.Request(self.url + "/v1/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        text, chunks = "", 0
        with urllib.request.urlopen(req, timeout=timeout) as r:
            for raw in r:
                line = raw.decode().strip()
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                event = json.loads(line[6:])
                if "error" in event:
                    raise AssertionError(f"stream error: {event['error']}")
                text += event["choices"][0]["text"]
                chunks += 1
                if chunks == 3 and on_third_chunk:
                    on_third_chunk()
        return text

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.log.close()
