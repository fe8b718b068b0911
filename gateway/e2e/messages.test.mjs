// Client tests of the Anthropic Messages surface: the official
// `@anthropic-ai/sdk` and Claude Code (`claude -p`), against
// `docstream --demo` (the built-in agent simulator) with an API key.
//
//   DOCSTREAM_BIN=/path/to/docstream node --test messages.test.mjs
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';

import Anthropic from '@anthropic-ai/sdk';
import { DemoServer } from './demo-server.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const key = 'sk-e2e-messages';
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'docstream-messages-'));
const simLog = path.join(tmp, 'sim.log');
const demo = new DemoServer();

before(async () => {
  await demo.start({
    DOCSTREAM_AUTH_API_KEYS: key,
    DOCSTREAM_SIM_LOG: simLog,
    // Lets DOCSTREAM_SIM_LOG reach the simulator, whose environment drops
    // DOCSTREAM_* names by default.
    DOCSTREAM_AGENT_ENV_DENY: '*KEY*,*TOKEN*,*SECRET*',
  });
});

after(async () => {
  await demo.stop();
  fs.rmSync(tmp, { recursive: true, force: true });
});

const client = (opts = {}) => new Anthropic({ baseURL: demo.url, apiKey: key, maxRetries: 0, ...opts });

/** The simulator's starts so far, one per agent run. */
function simStarts() {
  if (!fs.existsSync(simLog)) return [];
  return fs.readFileSync(simLog, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l))
    .filter((s) => !s.argv.includes('models'));
}

/** The sum of a counter's series whose labels include every given one. */
async function metric(name, ...labels) {
  const text = await (await fetch(`${demo.url}/metrics`)).text();
  return text.split('\n').filter((l) => l.startsWith(`${name}{`) && labels.every((x) => l.includes(x)))
    .reduce((sum, l) => sum + Number(l.split(' ').pop()), 0);
}

const textOf = (message) => message.content.filter((b) => b.type === 'text').map((b) => b.text).join('');

describe('@anthropic-ai/sdk', () => {
  test('messages.create: one message with a text block, end_turn and usage', async () => {
    const message = await client().messages.create({
      model: 'auto',
      max_tokens: 1024,
      system: 'You are terse.',
      messages: [{ role: 'user', content: 'hello from the anthropic SDK' }],
    });
    assert.equal(message.type, 'message');
    assert.equal(message.role, 'assistant');
    assert.match(message.id, /^msg_/);
    assert.equal(message.model, 'auto');
    assert.equal(message.stop_reason, 'end_turn');
    assert.deepEqual(message.content.map((b) => b.type), ['text']);
    assert.ok(textOf(message).includes('hello from the anthropic SDK'), textOf(message));
    assert.ok(textOf(message).includes('```go\npackage main'), 'no Go code block');
    assert.ok(message.usage.input_tokens > 0 && message.usage.output_tokens > 0, JSON.stringify(message.usage));
  });

  test('messages.create with stream: the events in order, the same text', async () => {
    const params = { model: 'auto', max_tokens: 1024, messages: [{ role: 'user', content: 'tour' }] };
    const stream = await client().messages.create({ ...params, stream: true });
    const types = [];
    let text = '';
    let usage = null;
    for await (const event of stream) {
      types.push(event.type);
      if (event.type === 'content_block_delta' && event.delta.type === 'text_delta') text += event.delta.text;
      if (event.type === 'message_delta') usage = event.usage;
    }
    assert.equal(types[0], 'message_start');
    assert.deepEqual(types.slice(-2), ['message_delta', 'message_stop']);
    assert.ok(types.includes('content_block_start') && types.includes('content_block_stop'), types.join(' '));
    assert.ok(usage.output_tokens > 0, JSON.stringify(usage));
    const whole = await client().messages.create(params);
    assert.equal(text, textOf(whole), 'the streamed text differs from the non-streamed one');
    assert.ok(text.includes('### Plan: Configurable greeting'), 'the tour is not rendered as markdown');
  });

  test('messages.stream() and finalMessage(): thinking then text', async () => {
    const stream = client().messages.stream({
      model: 'sim-fast',
      max_tokens: 4096,
      thinking: { type: 'enabled', budget_tokens: 2048 },
      messages: [{ role: 'user', content: 'hello with thinking' }],
    });
    let streamed = '';
    let thought = '';
    stream.on('text', (delta) => { streamed += delta; });
    stream.on('thinking', (delta) => { thought += delta; });
    const message = await stream.finalMessage();
    assert.deepEqual(message.content.map((b) => b.type), ['thinking', 'text']);
    assert.equal(message.content[0].thinking, thought);
    assert.ok(thought.length > 0, 'no thinking');
    assert.equal(textOf(message), streamed);
    assert.ok(streamed.includes('hello with thinking'), streamed);
    assert.equal(message.stop_reason, 'end_turn');
    assert.ok(message.usage.output_tokens > 0 && message.usage.input_tokens > 0, JSON.stringify(message.usage));
  });

  test('errors: Anthropic error types, mid-stream too', async () => {
    await assert.rejects(
      client({ apiKey: 'wrong' }).messages.create({ model: 'auto', max_tokens: 8, messages: [{ role: 'user', content: 'hi' }] }),
      (err) => err instanceof Anthropic.AuthenticationError && err.error?.error?.type === 'authentication_error',
    );
    await assert.rejects(
      client().messages.create({ model: 'auto', max_tokens: 8, messages: [] }),
      (err) => err instanceof Anthropic.BadRequestError && err.error?.error?.type === 'invalid_request_error',
    );
    await assert.rejects(
      client().messages.countTokens({ model: 'auto', messages: [{ role: 'user', content: 'hi' }] }),
      (err) => err instanceof Anthropic.BadRequestError && /not supported/.test(err.message),
    );
    const before = await metric('docstream_runs_total', 'outcome="agent_exit"');
    const stream = client().messages.stream({ model: 'auto', max_tokens: 8, messages: [{ role: 'user', content: 'fault:crash' }] });
    await assert.rejects(stream.finalMessage(), (err) => /api_error/.test(err.message) && /agent_exit/.test(err.message));
    await assert.rejects(
      client().messages.create({ model: 'auto', max_tokens: 8, messages: [{ role: 'user', content: 'fault:crash' }] }),
      (err) => err instanceof Anthropic.APIError && err.status === 502 && err.error?.error?.type === 'api_error',
    );
    assert.equal((await metric('docstream_runs_total', 'outcome="agent_exit"')) - before, 2, 'the failed runs were retried');
  });
});

// ---- Claude Code ----------------------------------------------------------

/** Runs `claude` with args in a headless set-up of its own; resolves to its exit code and output. */
function claude(args, env) {
  const bin = path.join(here, 'node_modules', '.bin', 'claude');
  const home = path.join(tmp, 'home');
  const work = path.join(tmp, 'work');
  fs.mkdirSync(path.join(home, 'config'), { recursive: true });
  fs.mkdirSync(work, { recursive: true });
  return new Promise((resolve, reject) => {
    const child = spawn(bin, args, {
      cwd: work,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: {
        PATH: process.env.PATH,
        HOME: home,
        CLAUDE_CONFIG_DIR: path.join(home, 'config'),
        ANTHROPIC_BASE_URL: demo.url,
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
        DISABLE_TELEMETRY: '1',
        DISABLE_AUTOUPDATER: '1',
        DISABLE_ERROR_REPORTING: '1',
        ...env,
      },
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c) => { stdout += c; });
    child.stderr.on('data', (c) => { stderr += c; });
    const timer = setTimeout(() => child.kill('SIGKILL'), 120_000);
    child.on('error', reject);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr });
    });
  });
}

describe('Claude Code', () => {
  test('claude -p, then claude -p --continue resumes the agent session with only the new message', async () => {
    const requests = () => metric('docstream_http_requests_total', 'route="/v1/messages"');
    const startsBefore = simStarts().length;
    const requestsBefore = await requests();

    const first = await claude(['-p', '--model', 'auto', 'hello from claude code'], { ANTHROPIC_API_KEY: key });
    assert.equal(first.code, 0, `claude -p failed (${first.signal ?? first.code}):\n${first.stdout}\n${first.stderr}\n${demo.log.join('')}`);
    assert.ok(first.stdout.includes('Docstream simulator'), `claude printed: ${first.stdout}`);
    let starts = simStarts();
    assert.equal(starts.length, startsBefore + 1, 'the first turn did not run the agent exactly once');
    assert.ok(!starts.at(-1).argv.includes('--resume'), 'the first turn resumed a session');
    assert.ok(starts.at(-1).prompt.endsWith('hello from claude code'), starts.at(-1).prompt.slice(-200));
    assert.equal((await requests()) - requestsBefore, 1, 'claude sent more than one request: a retry or a fallback');

    // The second turn sends the key as a bearer token.
    const second = await claude(['-p', '--continue', '--model', 'auto', 'echo the second turn'], { ANTHROPIC_AUTH_TOKEN: key });
    assert.equal(second.code, 0, `claude -p --continue failed:\n${second.stdout}\n${second.stderr}`);
    starts = simStarts();
    assert.equal(starts.length, startsBefore + 2, 'the second turn did not run the agent exactly once');
    const last = starts.at(-1);
    const i = last.argv.indexOf('--resume');
    assert.ok(i >= 0 && last.argv[i + 1], `the second turn did not resume the session: ${last.argv.join(' ')}`);
    assert.equal(last.prompt, 'echo the second turn', 'the resumed turn was sent more than the new message');
    assert.equal((await requests()) - requestsBefore, 2, 'claude sent more than one request for the second turn');
    // The echo scenario answers with what the agent was given.
    assert.ok(second.stdout.includes('"resume"'), `claude printed: ${second.stdout}`);
  });
});
