// Client tests of the Responses API (POST /v1/responses and the
// /v1/responses/{id} routes) against `docstream --demo`: the official
// `openai` SDK, the AI SDK's `openai()` provider (`@ai-sdk/openai`, which
// speaks Responses) and Codex CLI (`@openai/codex`) with a custom provider
// of wire_api "responses".
//
//   DOCSTREAM_BIN=/path/to/docstream node --test responses.test.mjs
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';

import { createOpenAI } from '@ai-sdk/openai';
import { generateText, streamText } from 'ai';
import OpenAI from 'openai';
import { DemoServer } from './demo-server.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'docstream-responses-'));

/** Starts a demo gateway whose simulator runs at full speed and logs its
 * starts to simLog. */
function startDemo(demo, simLog) {
  return demo.start({
    DOCSTREAM_LOG_FORMAT: 'json',
    DOCSTREAM_SIM_SPEED: '0',
    DOCSTREAM_SIM_LOG: simLog,
    // DOCSTREAM_SIM_* reaches the simulator; every other DOCSTREAM_* does not.
    DOCSTREAM_AGENT_ENV_DENY: 'DOCSTREAM_[^S]*,DOCSTREAM_S[^I]*,DOCSTREAM_SI[^M]*,DOCSTREAM_SIM[^_]*,*KEY*,*TOKEN*,*SECRET*',
  });
}

const demo = new DemoServer();
const simLog = path.join(tmp, 'sim.log');
let baseURL = '';

before(async () => {
  await startDemo(demo, simLog);
  baseURL = demo.url;
});

after(async () => {
  await demo.stop();
  fs.rmSync(tmp, { recursive: true, force: true });
});

const client = () => new OpenAI({ baseURL: `${baseURL}/v1`, apiKey: 'sk-test-anything', maxRetries: 0 });

/** The simulator's agent starts: argv and prompt of each. */
function simStarts(log) {
  if (!fs.existsSync(log)) return [];
  return fs
    .readFileSync(log, 'utf8')
    .split('\n')
    .filter((l) => l.trim())
    .map((l) => JSON.parse(l))
    .filter((s) => s.prompt);
}

/** The one agent start whose prompt holds text. */
function startWith(text, log = simLog) {
  const found = simStarts(log).filter((s) => s.prompt.includes(text));
  assert.equal(found.length, 1, `want one agent start with ${JSON.stringify(text)}, found ${found.length}`);
  return found[0];
}

/** The value of --resume in an agent start's argv, '' when absent. */
function resumed(start) {
  const i = start.argv.indexOf('--resume');
  return i >= 0 ? start.argv[i + 1] : '';
}

/** A gateway's requests on the /v1 routes, as "METHOD route status",
 * from its request log. */
function v1Requests(demo) {
  return demo.log
    .join('')
    .split('\n')
    .filter((l) => l.includes('"message":"request"'))
    .map((l) => JSON.parse(l))
    .filter((r) => r.route.startsWith('/v1/'))
    .map((r) => `${r.method} ${r.route} ${r.status}`);
}

describe('openai SDK', () => {
  test('responses.create: the Response object, its text and usage', async () => {
    const r = await client().responses.create({ model: 'auto', input: 'hello from responses.create', instructions: 'Be terse.' });
    assert.equal(r.object, 'response');
    assert.match(r.id, /^resp_/);
    assert.equal(r.status, 'completed');
    assert.equal(r.model, 'auto');
    assert.equal(r.instructions, 'Be terse.');
    assert.ok(r.output_text.includes('hello from responses.create'), r.output_text);
    assert.ok(r.output_text.includes('```go\npackage main'), 'no Go code block');
    assert.equal(r.output[0].type, 'message');
    assert.ok(r.usage.input_tokens > 0 && r.usage.output_tokens > 0, JSON.stringify(r.usage));
    assert.equal(r.usage.total_tokens, r.usage.input_tokens + r.usage.output_tokens);
    assert.equal(typeof r.usage.input_tokens_details.cached_tokens, 'number');
    // The same response, fetched.
    const got = await client().responses.retrieve(r.id);
    assert.equal(got.id, r.id);
    assert.equal(got.output_text, r.output_text);
  });

  test('responses.create with stream: OpenAI order, growing sequence numbers, one completed', async () => {
    const stream = await client().responses.create({ model: 'auto', input: 'hello streamed', stream: true });
    const events = [];
    for await (const ev of stream) events.push(ev);
    assert.equal(events[0].type, 'response.created');
    assert.equal(events[1].type, 'response.in_progress');
    events.forEach((ev, i) => assert.equal(ev.sequence_number, i, `event ${i} (${ev.type})`));
    const types = events.map((e) => e.type);
    assert.ok(types.indexOf('response.output_item.added') < types.indexOf('response.content_part.added'));
    assert.ok(types.indexOf('response.content_part.added') < types.indexOf('response.output_text.delta'));
    assert.deepEqual(types.slice(-4), ['response.output_text.done', 'response.content_part.done', 'response.output_item.done', 'response.completed']);
    const text = events.filter((e) => e.type === 'response.output_text.delta').map((e) => e.delta).join('');
    assert.equal(events.find((e) => e.type === 'response.output_text.done').text, text);
    const last = events.at(-1);
    assert.equal(last.type, 'response.completed');
    assert.equal(types.filter((t) => t === 'response.completed').length, 1);
    assert.ok(last.response.usage.output_tokens > 0);
    assert.ok(text.includes('> hello streamed'), text);
  });

  test('responses.stream(): text events and the final response', async () => {
    const stream = client().responses.stream({ model: 'auto', input: 'hello via responses.stream' });
    let text = '';
    stream.on('response.output_text.delta', (e) => {
      text += e.delta;
    });
    const final = await stream.finalResponse();
    assert.equal(final.status, 'completed');
    assert.equal(final.output_text, text);
    assert.ok(text.includes('hello via responses.stream'), text);
  });

  test('previous_response_id resumes the agent session with only the new message', async () => {
    const first = await client().responses.create({ model: 'auto', input: 'echo sdk first turn' });
    assert.equal(resumed(startWith('echo sdk first turn')), '');
    const second = await client().responses.create({ model: 'auto', input: 'echo sdk second turn', previous_response_id: first.id });
    assert.equal(second.previous_response_id, first.id);
    const start = startWith('echo sdk second turn');
    assert.equal(start.prompt, 'echo sdk second turn');
    assert.ok(resumed(start), `not resumed: ${start.argv.join(' ')}`);
    await assert.rejects(
      client().responses.create({ model: 'auto', input: 'x', previous_response_id: 'resp_000000000000000000000000' }),
      (err) => err.status === 404 && err.param === 'previous_response_id',
    );
  });

  test('background: retrieve polls it, cancel and delete', async () => {
    const bg = await client().responses.create({ model: 'auto', input: 'fault:hang-mid', background: true });
    assert.equal(bg.status, 'in_progress');
    const cancelled = await client().responses.cancel(bg.id);
    assert.equal(cancelled.status, 'cancelled');
    assert.equal((await client().responses.retrieve(bg.id)).status, 'cancelled');
    await client().responses.delete(bg.id);
    await assert.rejects(client().responses.retrieve(bg.id), (err) => err.status === 404);

    // Re-attached with responses.stream({response_id}): GET ?stream=true.
    const bg2 = await client().responses.create({ model: 'auto', input: 'hello in the background', background: true });
    const stream = client().responses.stream({ response_id: bg2.id, starting_after: 2 });
    const final = await stream.finalResponse();
    assert.equal(final.status, 'completed');
    assert.ok(final.output_text.includes('hello in the background'), final.output_text);
  });
});

describe('AI SDK openai() provider', () => {
  const provider = () => createOpenAI({ baseURL: `${baseURL}/v1`, apiKey: 'sk-test' });

  test('generateText: text, finish reason, usage', async () => {
    const r = await generateText({ model: provider()('auto'), prompt: 'hello from generateText', maxRetries: 0 });
    assert.ok(r.text.includes('hello from generateText'), r.text);
    assert.equal(r.finishReason, 'stop');
    assert.ok(r.usage.inputTokens > 0 && r.usage.outputTokens > 0, JSON.stringify(r.usage));
    assert.match(r.response.id, /^resp_/);
  });

  test('a conversation: the next turn refers to the reply by its item id and resumes the agent session', async () => {
    const model = provider()('auto');
    const messages = [{ role: 'user', content: 'echo ai sdk first turn' }];
    const first = await generateText({ model, messages, maxRetries: 0 });
    messages.push(...first.response.messages, { role: 'user', content: 'echo ai sdk second turn' });
    const second = await generateText({ model, messages, maxRetries: 0 });
    assert.equal(second.finishReason, 'stop');
    const start = startWith('echo ai sdk second turn');
    assert.equal(start.prompt, 'echo ai sdk second turn');
    assert.ok(resumed(start), `not resumed: ${start.argv.join(' ')}`);
  });

  test('streamText: text, finish reason, usage', async () => {
    const result = streamText({ model: provider()('auto'), prompt: 'hello from streamText', maxRetries: 0 });
    let text = '';
    for await (const t of result.textStream) text += t;
    assert.ok(text.includes('hello from streamText'), text);
    assert.equal(await result.finishReason, 'stop');
    const usage = await result.usage;
    assert.ok(usage.inputTokens > 0 && usage.outputTokens > 0, JSON.stringify(usage));
  });
});

describe('Codex CLI', () => {
  // A gateway of its own, whose request log holds Codex's requests alone.
  const cx = new DemoServer();
  const cxLog = path.join(tmp, 'codex-sim.log');
  const codexBin = path.join(here, 'node_modules', '.bin', 'codex');
  const home = path.join(tmp, 'codex-home');
  const work = path.join(tmp, 'codex-work');

  /** Runs `codex exec …` headless against the demo gateway. */
  function codex(args) {
    return new Promise((resolve) => {
      execFile(
        codexBin,
        ['exec', '--skip-git-repo-check', ...args],
        { cwd: work, env: { ...process.env, CODEX_HOME: home, DOCSTREAM_KEY: 'sk-codex' }, timeout: 120_000, maxBuffer: 64 << 20 },
        (err, stdout, stderr) => resolve({ code: err ? (err.code ?? 1) : 0, stdout, stderr }),
      ).stdin?.end();
    });
  }

  after(() => cx.stop());

  before(async () => {
    await startDemo(cx, cxLog);
    fs.mkdirSync(home, { recursive: true });
    fs.mkdirSync(work, { recursive: true });
    fs.writeFileSync(
      path.join(home, 'config.toml'),
      `model = "auto"
model_provider = "docstream"
approval_policy = "never"
sandbox_mode = "read-only"
check_for_update_on_startup = false

[model_providers.docstream]
name = "Docstream"
base_url = "${cx.url}/v1"
env_key = "DOCSTREAM_KEY"
wire_api = "responses"
supports_websockets = true
stream_max_retries = 0

[analytics]
enabled = false

[feedback]
enabled = false

[otel]
exporter = "none"

[features]
plugins = false
remote_plugin = false
apps = false
`,
    );
  });

  test('codex exec, then exec resume --last: one POST a turn, the second turn resumes the agent session, a failed run is an error', { timeout: 300_000 }, async () => {
    const first = await codex(['echo codex first turn']);
    assert.equal(first.code, 0, `codex exec failed:\n${first.stderr.slice(-3000)}`);
    assert.ok(first.stdout.includes('Docstream simulator'), `codex printed:\n${first.stdout.slice(-2000)}`);
    assert.equal(first.stdout.split('Start a prompt with').length, 2, 'the answer is printed more than once');
    const start1 = startWith('echo codex first turn', cxLog);
    assert.equal(resumed(start1), '');

    const second = await codex(['resume', '--last', 'echo codex second turn']);
    assert.equal(second.code, 0, `codex exec resume failed:\n${second.stderr.slice(-3000)}`);
    // The simulator's echo scenario answers with what the agent was started with.
    assert.ok(second.stdout.includes('"prompt":"echo codex second turn"'), `codex printed:\n${second.stdout.slice(-2000)}`);
    const start2 = startWith('echo codex second turn', cxLog);
    assert.equal(start2.prompt, 'echo codex second turn', 'the resumed turn got more than the new message');
    assert.ok(resumed(start2), `not resumed: ${start2.argv.join(' ')}`);

    // A run that fails ends with response.failed: codex prints its error
    // and fails (stream_max_retries = 0: a retry would run the agent again).
    const third = await codex(['resume', '--last', 'fault:crash']);
    assert.notEqual(third.code, 0);
    assert.match(third.stderr, /ERROR: .*cursor-agent exited with code 1/);
    assert.ok(third.stderr.includes('simulated crash'), third.stderr.slice(-2000));

    // Each turn: one WebSocket try answered 426, then one POST; no retry.
    // (A request is logged once its handler returns: the last may come
    // after codex exits.)
    const turn = ['GET /v1/responses 426', 'POST /v1/responses 200'];
    for (let i = 0; i < 100 && v1Requests(cx).length < 6; i++) await new Promise((r) => setTimeout(r, 50));
    assert.deepEqual(v1Requests(cx), [...turn, ...turn, ...turn]);
  });
});
