// The official openai client drives `brigade serve`: completions and chat, streamed and not,
// greedy output equal to `brigade generate` (a list of prompts too), usage fields, bad requests, API keys; n choices with
// logprobs, echo with max_tokens 0, and tool calls made by scripted models (run_node_test.sh).
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import OpenAI from 'openai';

const brigade = process.env.BRIGADE;
const modelDir = process.env.MODEL_DIR;
const apiKey = 'sk-brigade-test';
let server;
let client;
let modelName;

const toolServers = {};

// Starts `brigade serve` on a free port and resolves with the URL it prints once listening.
function startServer(dir = modelDir, onStart = (proc) => { server = proc; }) {
  return new Promise((resolve, reject) => {
    const proc = spawn(brigade, ['serve', '--model', dir, '--listen', '127.0.0.1:0',
      '--api-key', apiKey, '--drain-timeout-s', '5'], { stdio: ['ignore', 'pipe', 'inherit'] });
    onStart(proc);
    let out = '';
    proc.stdout.on('data', (chunk) => {
      out += chunk;
      const m = out.match(/serving '([^']+)' at (http:\/\/\S+)/);
      if (m) resolve({ name: m[1], url: m[2] });
    });
    proc.on('exit', (code) => reject(new Error(`brigade serve exited (${code}): ${out}`)));
  });
}

// A client of a server on a scripted model (run_node_test.sh made them).
async function toolClient(env) {
  if (!toolServers[env]) {
    let proc;
    const { name, url } = await startServer(process.env[env], (p) => { proc = p; });
    toolServers[env] = { proc, name,
      client: new OpenAI({ baseURL: `${url}/v1`, apiKey, maxRetries: 0, timeout: 120000 }) };
  }
  return toolServers[env];
}

const weatherTool = { type: 'function', function: { name: 'get_weather',
  description: 'The weather in a city',
  parameters: { type: 'object', properties: { city: { type: 'string' },
    unit: { type: 'string', enum: ['C', 'F'] } }, required: ['city'] } } };

function generate(args) {
  const out = execFileSync(brigade, ['generate', '--model', modelDir, '--json', ...args],
    { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
  return JSON.parse(out);
}

function checkUsage(usage) {
  assert.ok(usage.prompt_tokens > 0);
  assert.ok(usage.completion_tokens > 0);
  assert.equal(usage.total_tokens, usage.prompt_tokens + usage.completion_tokens);
  // The prefix cache's figures: every prompt token is a hit or a miss.
  assert.equal(usage.prompt_tokens_details.cached_tokens, usage.prompt_cache_hit_tokens);
  assert.equal(usage.prompt_cache_hit_tokens + usage.prompt_cache_miss_tokens, usage.prompt_tokens);
}

// Usage apart from the prefix cache's figures, which differ when a prompt repeats.
function withoutCache(usage) {
  const { prompt_tokens_details, prompt_cache_hit_tokens, prompt_cache_miss_tokens, ...rest } =
    usage;
  return rest;
}

// A repeated prompt reuses at least what its first run found cached.
function checkRepeat(usage, first) {
  assert.deepEqual(withoutCache(usage), withoutCache(first));
  assert.ok(usage.prompt_cache_hit_tokens >= first.prompt_cache_hit_tokens);
}

before(async () => {
  const { name, url } = await startServer();
  modelName = name;
  client = new OpenAI({ baseURL: `${url}/v1`, apiKey, maxRetries: 0, timeout: 120000 });
});

after(async () => {
  for (const { proc } of Object.values(toolServers)) {
    if (proc.exitCode !== null) continue;
    const exited = new Promise((resolve) => proc.on('exit', resolve));
    proc.kill('SIGTERM');
    await exited;
  }
  if (!server || server.exitCode !== null) return;
  const exited = new Promise((resolve) => server.on('exit', resolve));
  server.kill('SIGTERM');
  assert.equal(await exited, 0, 'brigade serve exits 0 on SIGTERM');
});

test('models.list names the served model', async () => {
  const models = await client.models.list();
  assert.deepEqual(models.data.map((m) => m.id), [modelName]);
});

test('a greedy completion equals brigade generate, text prompt', async () => {
  const prompt = 'The brigade of experts';
  const c = await client.completions.create({ model: modelName, prompt, max_tokens: 24,
    temperature: 0 });
  const g = generate(['--prompt', prompt, '--max-tokens', '24']);
  assert.equal(c.object, 'text_completion');
  assert.equal(c.choices[0].text, g.text);
  assert.equal(c.usage.completion_tokens, g.ids.length);
  assert.equal(c.choices[0].finish_reason, g.finish_reason === 'stop' ? 'stop' : 'length');
  checkUsage(c.usage);
});

test('a greedy completion equals brigade generate, token id prompt', async () => {
  const ids = [5, 17, 250, 99, 1000, 3];
  const c = await client.completions.create({ model: modelName, prompt: ids, max_tokens: 20,
    temperature: 0, ignore_eos: true });
  const g = generate(['--prompt-ids', ids.join(','), '--max-tokens', '20', '--ignore-eos']);
  assert.equal(c.choices[0].text, g.text);
  assert.equal(c.usage.prompt_tokens, ids.length);
  assert.equal(c.usage.completion_tokens, 20);
  assert.equal(c.choices[0].finish_reason, 'length');
});

test('a list of prompts answers each as brigade generate does, choice i for prompt i', async () => {
  const prompts = ['The brigade of experts', [5, 17, 250, 99, 1000, 3], 'Experts on shards'];
  const c = await client.completions.create({ model: modelName, prompt: prompts, max_tokens: 10,
    temperature: 0, ignore_eos: true });
  const want = prompts.map((p) => generate(typeof p === 'string'
    ? ['--prompt', p, '--max-tokens', '10', '--ignore-eos']
    : ['--prompt-ids', p.join(','), '--max-tokens', '10', '--ignore-eos']));
  const choices = [...c.choices].sort((a, b) => a.index - b.index);
  assert.deepEqual(choices.map((x) => x.index), [0, 1, 2]);
  assert.deepEqual(choices.map((x) => x.text), want.map((g) => g.text));
  assert.equal(c.usage.completion_tokens, 30);
});

test('a streamed completion matches the whole one, with usage last', async () => {
  const request = { model: modelName, prompt: 'Experts on shards', max_tokens: 16,
    temperature: 0, ignore_eos: true };
  const whole = await client.completions.create(request);
  const stream = await client.completions.create({ ...request, stream: true,
    stream_options: { include_usage: true } });
  let text = '';
  let finish = null;
  let usage = null;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    for (const choice of chunk.choices) {
      text += choice.text;
      finish = choice.finish_reason ?? finish;
    }
  }
  assert.equal(text, whole.choices[0].text);
  assert.equal(finish, 'length');
  checkRepeat(usage, whole.usage);
  checkUsage(usage);
});

test('chat, streamed and not, gives the same greedy answer', async () => {
  const request = { model: modelName, max_tokens: 16, temperature: 0, ignore_eos: true,
    messages: [{ role: 'system', content: 'You are terse.' },
      { role: 'user', content: 'Which expert answers?' }] };
  const whole = await client.chat.completions.create(request);
  assert.equal(whole.object, 'chat.completion');
  assert.equal(whole.choices[0].message.role, 'assistant');
  assert.equal(whole.choices[0].finish_reason, 'length');
  assert.equal(whole.usage.completion_tokens, 16);
  checkUsage(whole.usage);

  const stream = await client.chat.completions.create({ ...request, stream: true,
    stream_options: { include_usage: true } });
  let content = '';
  let role = null;
  let usage = null;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    for (const choice of chunk.choices) {
      role = choice.delta.role ?? role;
      content += choice.delta.content ?? '';
    }
  }
  assert.equal(role, 'assistant');
  assert.equal(content, whole.choices[0].message.content);
  checkRepeat(usage, whole.usage);
  // 39 prompt tokens: the repeat finds the first run's full blocks in the cache.
  assert.ok(usage.prompt_cache_hit_tokens > 0);
});

test('a chat answer equals brigade generate on the rendered prompt', async () => {
  const c = await client.chat.completions.create({ model: modelName, max_tokens: 12,
    temperature: 0, messages: [{ role: 'user', content: 'Hello' }] });
  const rendered = '<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n';
  const g = generate(['--prompt', rendered, '--max-tokens', '12']);
  assert.equal(c.choices[0].message.content, g.text);
  assert.equal(c.usage.completion_tokens, g.ids.length);
});

test('bad requests get 4xx and the server answers the next good one', async () => {
  const bad = [
    [{ model: modelName, prompt: 'x', max_tokens: 0 }, 'max_tokens'],
    [{ model: 'no-such-model', prompt: 'x', max_tokens: 2 }, 'model'],
    [{ model: modelName, prompt: 'x', max_tokens: 2, n: 0 }, 'n'],
    [{ model: modelName, prompt: 'x', max_tokens: 2, n: -2 }, 'n'],
    [{ model: modelName, prompt: 'x', max_tokens: 2, n: 2, best_of: 1 }, 'best_of'],
    [{ model: modelName, prompt: 'x', max_tokens: 2, logprobs: 21 }, 'logprobs'],
    [{ model: modelName, prompt: 'x', max_tokens: 2, logit_bias: { 3: 500 } }, 'logit_bias.3'],
    [{ model: modelName, prompt: 'x', max_tokens: 100000 }, 'max_tokens'],
  ];
  for (const [body, param] of bad) {
    await assert.rejects(client.completions.create(body), (err) => {
      assert.ok(err instanceof OpenAI.BadRequestError, `${param}: ${err}`);
      assert.equal(err.status, 400);
      assert.equal(err.param, param);
      return true;
    });
    const ok = await client.completions.create({ model: modelName, prompt: 'ok', max_tokens: 2 });
    assert.ok(ok.usage.completion_tokens >= 1);
  }
  await assert.rejects(client.chat.completions.create({ model: modelName, messages: [] }),
    (err) => err.status === 400 && err.param === 'messages');
  const hello = [{ role: 'user', content: 'hi' }];
  const badChat = [
    [{ tools: [{ type: 'function', function: { description: 'no name' } }] },
      'tools[0].function.name'],
    [{ tools: [{ type: 'function', function: { name: 'f', parameters: 'not a schema' } }] },
      'tools[0].function.parameters'],
    [{ tools: [{ type: 'retrieval' }] }, 'tools[0]'],
    [{ tools: [weatherTool], tool_choice: { type: 'function', function: { name: 'other' } } },
      'tool_choice'],
    [{ tool_choice: 'required' }, 'tool_choice'],
  ];
  for (const [extra, param] of badChat) {
    await assert.rejects(
      client.chat.completions.create({ model: modelName, messages: hello, ...extra }),
      (err) => err.status === 400 && err.param === param || assert.fail(`${param}: ${err}`));
  }
});

test('a wrong API key gets 401', async () => {
  const other = new OpenAI({ baseURL: client.baseURL, apiKey: 'sk-wrong', maxRetries: 0 });
  await assert.rejects(other.models.list(), (err) => err instanceof OpenAI.AuthenticationError);
  await assert.rejects(
    other.completions.create({ model: modelName, prompt: 'x', max_tokens: 1 }),
    (err) => err.status === 401);
});

test('n=3 with logprobs: three seeded choices, streamed as whole', async () => {
  const request = { model: modelName, prompt: 'Experts on shards', max_tokens: 8,
    temperature: 1, seed: 42, n: 3, logprobs: 2, ignore_eos: true };
  const whole = await client.completions.create(request);
  assert.deepEqual(whole.choices.map((c) => c.index), [0, 1, 2]);
  for (const c of whole.choices) {
    assert.equal(c.logprobs.token_logprobs.length, 8);
    // A token's entry names it even when it is a special token the text leaves out.
    assert.equal(c.logprobs.tokens.join('').replace(/<\|[^|]*\|>/g, ''), c.text);
  }
  assert.equal(whole.usage.completion_tokens, 24);
  // Three seeds: with temperature 1 on a random model, the choices differ.
  assert.ok(new Set(whole.choices.map((c) => c.text)).size > 1);
  const stream = await client.completions.create({ ...request, stream: true });
  const texts = ['', '', ''];
  const counts = [0, 0, 0];
  for await (const chunk of stream) {
    for (const c of chunk.choices) {
      texts[c.index] += c.text;
      counts[c.index] += c.logprobs ? c.logprobs.token_logprobs.length : 0;
    }
  }
  assert.deepEqual(texts, whole.choices.map((c) => c.text));
  assert.deepEqual(counts, [8, 8, 8]);

  const chat = await client.chat.completions.create({ model: modelName, n: 3, max_tokens: 6,
    seed: 9, logprobs: true, top_logprobs: 1, ignore_eos: true,
    messages: [{ role: 'user', content: 'three answers' }] });
  assert.equal(chat.choices.length, 3);
  for (const c of chat.choices) assert.equal(c.logprobs.content.length, 6);
});

test('echo with max_tokens 0 scores the prompt: its text, one logprob per token', async () => {
  const prompt = 'The brigade of experts';
  const c = await client.completions.create({ model: modelName, prompt, echo: true,
    max_tokens: 0, logprobs: 1 });
  assert.equal(c.choices[0].text, prompt);
  const lp = c.choices[0].logprobs;
  assert.equal(lp.tokens.length, c.usage.prompt_tokens);
  assert.equal(lp.token_logprobs[0], null);
  assert.ok(lp.token_logprobs.slice(1).every((x) => typeof x === 'number' && x <= 0));
  assert.equal(c.usage.completion_tokens, 0);
  assert.equal(c.choices[0].finish_reason, 'length');
});

test('a tool conversation: the model calls get_weather, the tool answers, the call repeats',
  async () => {
    const { name, client: tools } = await toolClient('CALLS_MODEL_DIR');
    const messages = [{ role: 'user', content: 'What is the weather in Paris?' }];
    const first = await tools.chat.completions.create({ model: name, messages,
      tools: [weatherTool], temperature: 0 });
    const choice = first.choices[0];
    assert.equal(choice.finish_reason, 'tool_calls');
    assert.equal(choice.message.content, null);
    assert.equal(choice.message.tool_calls.length, 1);
    const call = choice.message.tool_calls[0];
    assert.equal(call.type, 'function');
    assert.equal(call.function.name, 'get_weather');
    assert.deepEqual(JSON.parse(call.function.arguments), { city: 'Paris', unit: 'C' });

    // The streamed answer's deltas, accumulated by index as clients do, give the same call.
    const stream = await tools.chat.completions.create({ model: name, messages,
      tools: [weatherTool], temperature: 0, stream: true });
    const calls = [];
    let finish = null;
    for await (const chunk of stream) {
      for (const c of chunk.choices) {
        finish = c.finish_reason ?? finish;
        for (const d of c.delta.tool_calls ?? []) {
          calls[d.index] ??= { id: '', name: '', arguments: '' };
          calls[d.index].id += d.id ?? '';
          calls[d.index].name += d.function?.name ?? '';
          calls[d.index].arguments += d.function?.arguments ?? '';
        }
      }
    }
    assert.equal(finish, 'tool_calls');
    assert.equal(calls.length, 1);
    assert.equal(calls[0].name, 'get_weather');
    assert.deepEqual(JSON.parse(calls[0].arguments), { city: 'Paris', unit: 'C' });

    // The next turn carries the call and the tool's answer back.
    const second = await tools.chat.completions.create({ model: name, tools: [weatherTool],
      temperature: 0, messages: [...messages, choice.message,
        { role: 'tool', tool_call_id: call.id, content: '{"temperature": 18}' }] });
    assert.ok(second.usage.prompt_tokens > first.usage.prompt_tokens);
    assert.equal(second.choices[0].message.tool_calls[0].function.name, 'get_weather');

    // tool_choice none: no tools offered, nothing parsed: the same text comes back as content.
    const none = await tools.chat.completions.create({ model: name, messages,
      tools: [weatherTool], tool_choice: 'none', temperature: 0 });
    assert.equal(none.choices[0].finish_reason, 'stop');
    assert.match(none.choices[0].message.content, /^<tool_call>\n\{"name": "get_weather"/);
    assert.equal(none.choices[0].message.tool_calls, undefined);
  });

test('tool_choice required opens a call that the model completes; a malformed call is content',
  async () => {
    const { name, client: tools } = await toolClient('COMPLETES_MODEL_DIR');
    const messages = [{ role: 'user', content: 'Weather in Oslo, please.' }];
    const forced = await tools.chat.completions.create({ model: name, messages,
      tools: [weatherTool], tool_choice: 'required', temperature: 0 });
    assert.equal(forced.choices[0].finish_reason, 'tool_calls');
    const call = forced.choices[0].message.tool_calls[0];
    assert.equal(call.function.name, 'get_weather');
    assert.deepEqual(JSON.parse(call.function.arguments), { city: 'Oslo' });

    // Left to itself (auto), this model writes a call's body without its opening tag: content.
    const auto = await tools.chat.completions.create({ model: name, messages,
      tools: [weatherTool], temperature: 0 });
    assert.equal(auto.choices[0].finish_reason, 'stop');
    assert.equal(auto.choices[0].message.tool_calls, undefined);
    assert.match(auto.choices[0].message.content, /"city": "Oslo"/);

    // Named: the opening already names the function, so the model's text nests a second name:
    // malformed JSON, given back as content with its tags, and a 200.
    const named = await tools.chat.completions.create({ model: name, messages,
      tools: [weatherTool], tool_choice: { type: 'function', function: { name: 'get_weather' } },
      temperature: 0 });
    assert.equal(named.choices[0].message.tool_calls, undefined);
    assert.match(named.choices[0].message.content, /^<tool_call>\n\{"name": "get_weather"/);
  });
