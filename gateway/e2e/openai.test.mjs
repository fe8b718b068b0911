// Client SDK tests of the OpenAI-compatible surface and the SSE document
// stream: the official `openai` SDK, the Vercel AI SDK (`ai` +
// `@ai-sdk/openai-compatible`) and `eventsource-parser`, against
// `docstream --demo` (the built-in agent simulator).
//
//   DOCSTREAM_BIN=/path/to/docstream node --test openai.test.mjs
//
// DOCSTREAM_URL=http://127.0.0.1:8080 runs against a demo gateway that is
// already running instead.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { streamText } from 'ai';
import { createParser } from 'eventsource-parser';
import OpenAI from 'openai';
import { DemoServer } from './demo-server.mjs';


// ---- server -------------------------------------------------------------

const demo = new DemoServer();
let baseURL = '';
const serverLog = demo.log;

async function startServer() {
  await demo.start({ DOCSTREAM_LOG_FORMAT: 'json' });
  baseURL = demo.url;
}

const stopServer = () => demo.stop();

before(async () => {
  await startServer();
});

after(async () => {
  await stopServer();
});

// ---- helpers ------------------------------------------------------------

// Any key works while auth is off; frontends always send one.
const client = () => new OpenAI({ baseURL: `${baseURL}/v1`, apiKey: 'sk-test-anything', maxRetries: 0 });

/** The stored ChatResponse of a run, by its response id. */
async function storedResponse(responseId) {
  assert.ok(responseId, 'no X-Docstream-Response-Id header');
  const res = await fetch(`${baseURL}/v1/chat/${responseId}`);
  assert.equal(res.status, 200);
  return res.json();
}

/** OpenAI's meaning of the document model's usage. */
function openAIUsage(u) {
  const prompt = u.promptTokens + (u.cacheReadTokens ?? 0) + (u.cacheWriteTokens ?? 0);
  return { prompt, completion: u.completionTokens, total: prompt + u.completionTokens, cached: u.cacheReadTokens ?? 0 };
}

/** Parses an SSE body with eventsource-parser; returns events and comments. */
async function parseSSE(res) {
  const events = [];
  const comments = [];
  const errors = [];
  const parser = createParser({
    onEvent: (e) => events.push(e),
    onComment: (c) => comments.push(c),
    onError: (err) => errors.push(err),
  });
  const decoder = new TextDecoder();
  for await (const chunk of res.body) parser.feed(decoder.decode(chunk, { stream: true }));
  parser.feed(decoder.decode());
  assert.deepEqual(errors, [], 'the SSE parser reported errors');
  return { events, comments };
}

async function metric(name, labels) {
  const text = await (await fetch(`${baseURL}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name}{${labels}}`));
  return line ? Number(line.split(' ').pop()) : 0;
}

// ---- the openai SDK -----------------------------------------------------

describe('openai SDK', () => {
  test('streaming with include_usage: role first, text, one stop, a usage chunk, no duplicated text', async () => {
    const prompt = 'hello from the openai SDK';
    const { data: stream, response } = await client()
      .chat.completions.create({
        model: 'auto',
        messages: [{ role: 'user', content: prompt }],
        stream: true,
        stream_options: { include_usage: true },
      })
      .withResponse();
    assert.match(response.headers.get('content-type'), /^text\/event-stream/);
    const chunks = [];
    for await (const chunk of stream) chunks.push(chunk);

    assert.ok(chunks.length > 3, `only ${chunks.length} chunks`);
    const first = chunks[0];
    assert.equal(first.object, 'chat.completion.chunk');
    assert.match(first.id, /^chatcmpl-/);
    assert.equal(first.choices[0].delta.role, 'assistant');
    for (const c of chunks) {
      assert.equal(c.id, first.id, 'the id changes across chunks');
      assert.equal(c.created, first.created, 'created changes across chunks');
      assert.equal(c.model, 'auto');
    }
    assert.equal(chunks.slice(1).filter((c) => c.choices[0]?.delta?.role).length, 0, 'role repeated');

    const finishes = chunks.flatMap((c) => c.choices.map((ch) => ch.finish_reason)).filter((f) => f != null);
    assert.deepEqual(finishes, ['stop']);

    const last = chunks.at(-1);
    assert.deepEqual(last.choices, [], 'the usage chunk has choices: []');
    assert.ok(last.usage, 'no usage chunk');
    for (const c of chunks.slice(0, -1)) assert.ok(c.usage == null, 'usage on a content chunk');

    const content = chunks.map((c) => c.choices[0]?.delta?.content ?? '').join('');
    const reasoning = chunks.map((c) => c.choices[0]?.delta?.reasoning_content ?? '').join('');
    assert.ok(content.includes(`> ${prompt}`), `the reply does not quote the prompt: ${content}`);
    assert.ok(content.includes('```go\npackage main'), 'no Go code block');
    assert.ok(reasoning.length > 0, 'no reasoning_content');
    assert.ok(!content.includes(reasoning.slice(0, 30)), 'reasoning leaked into the content');

    // Usage as OpenAI means it: prompt_tokens includes cached tokens.
    const stored = await storedResponse(response.headers.get('x-docstream-response-id'));
    const want = openAIUsage(stored.usage);
    assert.ok(want.prompt > 0 && want.completion > 0, 'the simulator reported no usage');
    assert.equal(last.usage.prompt_tokens, want.prompt);
    assert.equal(last.usage.completion_tokens, want.completion);
    assert.equal(last.usage.total_tokens, want.total);
    assert.equal(last.usage.prompt_tokens_details.cached_tokens, want.cached);

    // No duplicated or lost text: the same prompt without streaming gives
    // the same content.
    const full = await client().chat.completions.create({ model: 'auto', messages: [{ role: 'user', content: prompt }] });
    assert.equal(content, full.choices[0].message.content);
  });

  test('non-streaming: message content, finish reason, usage', async () => {
    const { data: completion, response } = await client()
      .chat.completions.create({
        model: 'sim-fast',
        messages: [
          { role: 'system', content: 'You are terse.' },
          { role: 'user', content: 'hello without streaming' },
        ],
        temperature: 0.2,
        user: 'e2e',
      })
      .withResponse();
    assert.equal(completion.object, 'chat.completion');
    assert.match(completion.id, /^chatcmpl-/);
    assert.equal(completion.model, 'sim-fast');
    assert.equal(completion.choices.length, 1);
    const [choice] = completion.choices;
    assert.equal(choice.finish_reason, 'stop');
    assert.equal(choice.message.role, 'assistant');
    assert.ok(choice.message.content.includes('hello without streaming'), choice.message.content);
    // The system message is folded into the prompt the agent got.
    assert.ok(choice.message.content.includes('You are terse.'), choice.message.content);
    const want = openAIUsage((await storedResponse(response.headers.get('x-docstream-response-id'))).usage);
    assert.equal(completion.usage.prompt_tokens, want.prompt);
    assert.equal(completion.usage.completion_tokens, want.completion);
    assert.equal(completion.usage.total_tokens, want.total);
  });

  test('tour: every document type rendered as markdown', async () => {
    const stream = await client().chat.completions.create({
      model: 'auto',
      messages: [{ role: 'user', content: 'tour' }],
      stream: true,
    });
    let content = '';
    const finishes = [];
    for await (const chunk of stream) {
      const choice = chunk.choices[0];
      content += choice?.delta?.content ?? '';
      if (choice?.finish_reason) finishes.push(choice.finish_reason);
    }
    assert.deepEqual(finishes, ['stop']);
    const expect = {
      text: "I'll give you a tour",
      'code block with its language': '```python\n"""Settings shared by the greeter."""',
      'code reference with its caption': '`src/main.py:12-14`\n```python\ndef greet(name):',
      'file edit header': '**Edited `',
      'file edit diff': '```diff\n',
      'terminal command with output and exit code': '```shell\n$ python src/main.py Docstream\nHello, Docstream!\n```\nexit code 0',
      'rejected command': '`$ rm -rf build/` — rejected, not run',
      'tool call line': '> `read_file`',
      'plan checklist': '### Plan: Configurable greeting',
      'plan item': '- [ ] Read the greeting from an environment variable (after: config)',
      'todo update': '**Tasks:**\n- [x] Move settings into src/config.py',
      clarification: '1. Where should the greeting be configured?\n   - `env` ',
    };
    for (const [what, text] of Object.entries(expect)) {
      assert.ok(content.includes(text), `the tour's markdown lacks the ${what}: ${JSON.stringify(text)}`);
    }
    assert.equal(content.split('```').length % 2, 1, 'unbalanced code fences');
  });

  test('models.list() and models.retrieve() return the simulator models', async () => {
    const ids = [];
    for await (const m of client().models.list()) {
      ids.push(m.id);
      assert.equal(m.object, 'model');
      assert.ok(m.owned_by);
    }
    assert.deepEqual(ids, ['auto', 'sim-fast', 'sim-smart']);
    const m = await client().models.retrieve('sim-smart');
    assert.equal(m.id, 'sim-smart');
    await assert.rejects(client().models.retrieve('gpt-nope'), (err) => {
      assert.ok(err instanceof OpenAI.NotFoundError, String(err));
      assert.equal(err.status, 404);
      return true;
    });
  });

  test('an unknown model is an APIError with status 400', async () => {
    for (const stream of [false, true]) {
      await assert.rejects(
        client().chat.completions.create({ model: 'gpt-nope', messages: [{ role: 'user', content: 'hi' }], stream }),
        (err) => {
          assert.ok(err instanceof OpenAI.APIError, String(err));
          assert.ok(err instanceof OpenAI.BadRequestError, String(err));
          assert.equal(err.status, 400);
          assert.equal(err.code, 'unknown_model');
          assert.equal(err.type, 'invalid_request_error');
          assert.match(err.message, /gpt-nope/);
          return true;
        },
      );
    }
  });

  test('a run that fails mid-stream throws an APIError with its message', async () => {
    const stream = await client().chat.completions.create({
      model: 'auto',
      messages: [{ role: 'user', content: 'fault:crash' }],
      stream: true,
    });
    let content = '';
    await assert.rejects(
      (async () => {
        for await (const chunk of stream) content += chunk.choices[0]?.delta?.content ?? '';
      })(),
      (err) => {
        assert.ok(err instanceof OpenAI.APIError, String(err));
        assert.match(err.message, /exited/);
        return true;
      },
    );
    assert.ok(content.includes('**Error:**'), 'the text before the failure is lost');
  });

  test('a failed run is not retried by the SDK (it would run the agent again)', async () => {
    const before = await metric('docstream_runs_total', 'model="auto",outcome="agent_exit"');
    // The SDK's default: two retries on 5xx unless the server says no.
    const sdk = new OpenAI({ baseURL: `${baseURL}/v1`, apiKey: 'x' });
    await assert.rejects(
      sdk.chat.completions.create({ model: 'auto', messages: [{ role: 'user', content: 'fault:crash' }] }),
      (err) => {
        assert.ok(err instanceof OpenAI.InternalServerError, String(err));
        assert.equal(err.status, 502);
        assert.equal(err.code, 'agent_exit');
        assert.match(err.message, /exited/);
        return true;
      },
    );
    assert.equal((await metric('docstream_runs_total', 'model="auto",outcome="agent_exit"')) - before, 1, 'the agent ran more than once');
  });
});

// ---- the Vercel AI SDK --------------------------------------------------

describe('Vercel AI SDK (openai-compatible)', () => {
  const provider = () =>
    createOpenAICompatible({ name: 'docstream', baseURL: `${baseURL}/v1`, apiKey: 'sk-test', includeUsage: true });

  test('streamText: a run full of tools is markdown, not tool calls the SDK never offered', { timeout: 120_000 }, async () => {
    const result = streamText({ model: provider().chatModel('auto'), prompt: 'tour', maxRetries: 0 });
    const parts = [];
    for await (const part of result.fullStream) parts.push(part);
    assert.deepEqual(parts.filter((p) => p.type === 'error'), [], 'error parts in the stream');
    assert.deepEqual(parts.filter((p) => p.type.startsWith('tool')), [], 'tool parts in the stream');
    assert.equal(await result.finishReason, 'stop');
    const text = await result.text;
    assert.ok(text.includes('```diff') && text.includes('```shell'), text);
  });

  test('streamText: text, finish reason, usage', async () => {
    const prompt = 'hello from the AI SDK';
    const result = streamText({ model: provider().chatModel('auto'), prompt, maxRetries: 0 });
    const parts = [];
    for await (const part of result.fullStream) parts.push(part);
    const errors = parts.filter((p) => p.type === 'error');
    assert.deepEqual(errors, [], 'error parts in the stream');

    const text = await result.text;
    assert.ok(text.includes(`> ${prompt}`), text);
    assert.ok(text.includes('```go\npackage main'), text);
    assert.equal(await result.finishReason, 'stop');
    assert.ok((await result.reasoningText)?.length > 0, 'reasoning_content did not become reasoning');

    const { headers } = await result.response;
    const want = openAIUsage((await storedResponse(headers['x-docstream-response-id'])).usage);
    const usage = await result.usage;
    assert.equal(usage.inputTokens, want.prompt);
    assert.equal(usage.outputTokens, want.completion);
    assert.equal(usage.totalTokens, want.total);
    assert.equal(usage.inputTokenDetails?.cacheReadTokens, want.cached);

    // The same text as the openai SDK gets without streaming.
    const full = await client().chat.completions.create({ model: 'auto', messages: [{ role: 'user', content: prompt }] });
    assert.equal(text, full.choices[0].message.content);
  });

  test('streamText: a failed run surfaces as an error', async () => {
    const result = streamText({ model: provider().chatModel('auto'), prompt: 'fault:crash', maxRetries: 0, onError: () => {} });
    const parts = [];
    for await (const part of result.fullStream) parts.push(part);
    const err = parts.find((p) => p.type === 'error');
    assert.ok(err, `no error part in ${parts.map((p) => p.type).join(',')}`);
    assert.match(String(err.error?.message ?? JSON.stringify(err.error)), /exited/);
  });
});

// ---- eventsource-parser -------------------------------------------------

describe('eventsource-parser', () => {
  test('the /v1/chat document stream: ids 1..n, response_start first, done last', async () => {
    const res = await fetch(`${baseURL}/v1/chat`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Authorization: 'Bearer anything' },
      body: JSON.stringify({ prompt: 'hello from eventsource-parser', stream: true }),
    });
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type'), /^text\/event-stream/);
    assert.equal(res.headers.get('cache-control'), 'no-cache');
    const { events } = await parseSSE(res);
    assert.ok(events.length > 4, `only ${events.length} events`);
    events.forEach((e, i) => {
      assert.equal(e.id, String(i + 1), `event ${i} (${e.event}) has id ${e.id}`);
      assert.ok(e.event, `event ${i} has no event name`);
      JSON.parse(e.data);
    });
    assert.equal(events[0].event, 'response_start');
    assert.equal(events.at(-1).event, 'done');
    assert.equal(events.filter((e) => e.event === 'done').length, 1);
    const start = JSON.parse(events[0].data);
    const done = JSON.parse(events.at(-1).data);
    assert.equal(done.id, start.id);
    assert.equal(done.id, res.headers.get('x-docstream-response-id'));
    assert.equal(done.status, 'completed');

    // Documents open and close in pairs, content deltas only inside them.
    const open = new Set();
    let text = '';
    for (const e of events) {
      const d = JSON.parse(e.data);
      if (e.event === 'document_start') open.add(d.id);
      if (e.event === 'content_delta') {
        assert.ok(open.has(d.documentId), `delta for ${d.documentId} outside its document`);
        text += d.delta;
      }
      if (e.event === 'document_end') assert.ok(open.delete(d.documentId));
    }
    assert.equal(open.size, 0, 'documents left open');
    assert.ok(text.includes('hello from eventsource-parser'));
  });

  test('/v1/chat/completions: no event field, no id, [DONE] last', async () => {
    const res = await fetch(`${baseURL}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Authorization: 'Bearer sk-anything' },
      body: JSON.stringify({ model: 'auto', messages: [{ role: 'user', content: 'hello chunks' }], stream: true }),
    });
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type'), /^text\/event-stream/);
    const { events } = await parseSSE(res);
    assert.ok(events.length > 3);
    for (const e of events) {
      assert.equal(e.event, undefined, `a chunk has event: ${e.event}`);
      assert.equal(e.id, undefined, `a chunk has id: ${e.id}`);
    }
    assert.equal(events.at(-1).data, '[DONE]');
    assert.equal(events.filter((e) => e.data === '[DONE]').length, 1);
    const chunks = events.slice(0, -1).map((e) => JSON.parse(e.data));
    for (const c of chunks) assert.equal(c.object, 'chat.completion.chunk');
    assert.equal(chunks[0].choices[0].delta.role, 'assistant');
    assert.equal(chunks.at(-1).choices[0].finish_reason, 'stop');
    assert.deepEqual(chunks.at(-1).choices[0].delta, {});
  });
});
