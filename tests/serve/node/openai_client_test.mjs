// The official openai client drives `brigade serve`: completions and chat, streamed and not,
// greedy output equal to `brigade generate`, usage fields, bad requests, API keys.
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

// Starts `brigade serve` on a free port and resolves with the URL it prints once listening.
function startServer() {
  return new Promise((resolve, reject) => {
    server = spawn(brigade, ['serve', '--model', modelDir, '--listen', '127.0.0.1:0',
      '--api-key', apiKey, '--drain-timeout-s', '5'], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    server.stdout.on('data', (chunk) => {
      out += chunk;
      const m = out.match(/serving '([^']+)' at (http:\/\/\S+)/);
      if (m) resolve({ name: m[1], url: m[2] });
    });
    server.on('exit', (code) => reject(new Error(`brigade serve exited (${code}): ${out}`)));
  });
}

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
    [{ model: modelName, prompt: 'x', max_tokens: 2, n: 3 }, 'n'],
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
});

test('a wrong API key gets 401', async () => {
  const other = new OpenAI({ baseURL: client.baseURL, apiKey: 'sk-wrong', maxRetries: 0 });
  await assert.rejects(other.models.list(), (err) => err instanceof OpenAI.AuthenticationError);
  await assert.rejects(
    other.completions.create({ model: modelName, prompt: 'x', max_tokens: 1 }),
    (err) => err.status === 401);
});
