#!/usr/bin/env python3
"""How `brigade serve` picks a model's chat format (docs/chat_formats.md): a chat template it does
not recognise stops it at start, naming the model and saying to set chat_format; the manifest's
chat_format serves the model anyway; a recognised template decides the format over the
model_type; a chat_format that is not a format is refused naming the field. Prompts are checked
through /tokenize and /detokenize.

Usage: chat_format_test.py BRIGADE_BIN WORKDIR
"""
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "support"))
from brigade_server import make_small_model  # noqa: E402

TEMPLATES = os.path.join(HERE, "..", "..", "model", "chat_parity", "templates")
HI = [{"role": "user", "content": "Hi"}]


def set_template(model, template):
    path = os.path.join(model, "tokenizer_config.json")
    with open(path) as f:
        config = json.load(f)
    config["chat_template"] = template
    with open(path, "w") as f:
        json.dump(config, f)


def published(name):
    with open(os.path.join(TEMPLATES, name)) as f:
        return json.load(f)["chat_template"]


def serve(brigade, manifest, log_path):
    """Starts `brigade serve MANIFEST --engine`; (process, url or None if it exited)."""
    log = open(log_path, "w")
    proc = subprocess.Popen([brigade, "serve", manifest, "--engine", "--listen", "127.0.0.1:0"],
                            stdout=subprocess.PIPE, stderr=log, text=True)
    deadline = time.time() + 120
    while time.time() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        if " at http://" in line:
            return proc, line.split(" at ")[1].split()[0]
    proc.wait(timeout=60)
    return proc, None


def stop(proc):
    proc.terminate()
    proc.wait(timeout=60)


def post(url, path, body):
    req = urllib.request.Request(url + path, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.loads(r.read())


def prompt_of(url, messages):
    ids = post(url, "/tokenize", {"messages": messages})["tokens"]
    return post(url, "/detokenize", {"tokens": ids})["prompt"]


def write_manifest(workdir, name, body):
    path = os.path.join(workdir, name)
    with open(path, "w") as f:
        f.write(body)
    return path


def main():
    brigade, workdir = sys.argv[1], sys.argv[2]
    shutil.rmtree(workdir, ignore_errors=True)
    os.makedirs(workdir)
    model = os.path.join(workdir, "model")
    make_small_model(brigade, model)
    failures = []

    def check(label, ok, detail=""):
        print(("ok   " if ok else "FAIL ") + label)
        if not ok:
            failures.append(f"{label}: {detail}")

    # An unknown template: refused at start, before serving anything.
    set_template(model, "{% for m in messages %}{{ m.content }}{% endfor %}")
    plain = write_manifest(workdir, "plain.yaml", f"model: {model}\n")
    proc, url = serve(brigade, plain, os.path.join(workdir, "unknown.log"))
    with open(os.path.join(workdir, "unknown.log")) as f:
        log = f.read()
    check("an unknown template stops brigade serve", url is None and proc.returncode == 1,
          (url, proc.returncode))
    check("the refusal names the model and says to set chat_format",
          model in log and "set chat_format in the manifest" in log and "qwen3_moe" in log, log)
    if url:
        stop(proc)

    # The manifest's chat_format serves it, in that format.
    named = write_manifest(workdir, "named.yaml", f"model: {model}\nchat_format: chatml\n")
    proc, url = serve(brigade, named, os.path.join(workdir, "named.log"))
    check("chat_format: chatml serves the model", url is not None)
    if url:
        text = prompt_of(url, HI)
        check("chatml renders Qwen2's default system turn",
              text == "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
                      "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n", repr(text))
        stop(proc)

    # A recognised template decides the format, whatever the model_type.
    set_template(model, published("mixtral-8x7b-instruct-v0.1.json"))
    proc, url = serve(brigade, plain, os.path.join(workdir, "mixtral.log"))
    check("Mixtral's template is recognised on a qwen3_moe model", url is not None)
    if url:
        text = prompt_of(url, HI)
        check("it renders as Mixtral's (no bos: the tokenizer has none)",
              text == " [INST] Hi [/INST]", repr(text))
        stop(proc)

    bad = write_manifest(workdir, "bad.yaml", f"model: {model}\nchat_format: llama3\n")
    proc, url = serve(brigade, bad, os.path.join(workdir, "bad.log"))
    with open(os.path.join(workdir, "bad.log")) as f:
        log = f.read()
    check("a chat_format that is not a format is refused naming the field",
          url is None and "chat_format" in log and "deepseek_v3" in log, log)
    if url:
        stop(proc)

    for f in failures:
        print("FAILED:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
