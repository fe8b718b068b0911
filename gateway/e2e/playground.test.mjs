// Browser test of the playground: starts `docstream --demo` (the built-in agent
// simulator) and drives the page in Debian's Chromium with playwright-core.
//
//   DOCSTREAM_BIN=/path/to/docstream node --test playground.test.mjs
//
// DOCSTREAM_URL=http://127.0.0.1:8080 runs against a demo gateway that is
// already running instead. CHROMIUM overrides /usr/bin/chromium. Screenshots
// go to ./artifacts.
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, readFile, rm } from 'node:fs/promises';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';
import { DemoServer } from './demo-server.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const artifacts = path.join(here, 'artifacts');
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';

// The ten document types; a tour run produces every one except `error`.
const TOUR_TYPES = ['text', 'code_block', 'code_reference', 'file_edit', 'tool_call', 'terminal_command', 'plan', 'clarification', 'todo_update'];

let context = null;
let userDataDir = '';
let tourPage = null;

// ---- server -------------------------------------------------------------

const demo = new DemoServer();
let baseURL = '';
const serverLog = demo.log;
// Every start of the simulator appends a line {argv, prompt, …} here (empty
// with DOCSTREAM_URL: that gateway's simulator logs elsewhere).
let simLog = '';

async function startServer() {
  if (!process.env.DOCSTREAM_URL) simLog = path.join(await mkdtemp(path.join(os.tmpdir(), 'docstream-sim-')), 'sim.log');
  await demo.start(simLog ? { DOCSTREAM_SIM_LOG: simLog } : {});
  baseURL = demo.url;
}

/** The simulator's starts so far: [{argv, prompt, …}]. */
async function simStarts() {
  const text = await readFile(simLog, 'utf8').catch(() => '');
  return text
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l));
}

const stopServer = () => demo.stop();

// ---- browser ------------------------------------------------------------

before(async () => {
  await mkdir(artifacts, { recursive: true });
  await startServer();
  userDataDir = await mkdtemp(path.join(os.tmpdir(), 'docstream-chromium-'));
  context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
    viewport: { width: 1280, height: 900 },
    colorScheme: 'light',
  });
});

after(async () => {
  try {
    if (context) await context.close();
  } finally {
    await stopServer();
    if (userDataDir) await rm(userDataDir, { recursive: true, force: true });
    if (simLog) await rm(path.dirname(simLog), { recursive: true, force: true });
  }
});

/** Opens the playground (from url) in a new tab and records page errors. */
async function openPlayground(url = baseURL) {
  const page = await context.newPage();
  page.errors = [];
  page.on('pageerror', (err) => page.errors.push(String(err)));
  page.on('console', (msg) => {
    if (msg.type() === 'error') page.errors.push(msg.text());
  });
  await page.goto(`${url}/`);
  assert.equal(await page.title(), 'Docstream playground');
  await page.locator('#model option[value="auto"], #model option:nth-child(2)').first().waitFor({ state: 'attached', timeout: 10_000 });
  return page;
}

/** Runs fn with a page; on failure saves a screenshot and the server log. */
async function withPage(name, fn, { keep = false, url = baseURL } = {}) {
  const page = await openPlayground(url);
  try {
    await fn(page);
    assert.deepEqual(page.errors, [], 'the page logged errors');
  } catch (err) {
    await page.screenshot({ path: path.join(artifacts, `${name}-failure.png`), fullPage: true }).catch(() => {});
    if (serverLog.length) console.error(`--- docstream log (tail) ---\n${serverLog.slice(-60).join('')}`);
    throw err;
  } finally {
    if (!keep) await page.close();
  }
  return page;
}

// watchPosts collects the page's POST /v1/chat requests from now on.
function watchPosts(page) {
  const posts = [];
  page.on('request', (req) => {
    if (req.method() === 'POST' && new URL(req.url()).pathname === '/v1/chat') posts.push(req);
  });
  return posts;
}

// settle returns once every request the page's handlers have started is
// reported: a marker request goes out after them, and requests are reported
// in the order they are issued.
async function settle(page) {
  const marker = page.waitForRequest((r) => new URL(r.url()).search === '?settled');
  await page.evaluate(() => {
    fetch('/healthz?settled').catch(() => {});
  });
  await marker;
}

async function sendPrompt(page, prompt) {
  await page.fill('#prompt', prompt);
  await page.press('#prompt', 'Control+Enter');
}

// A turn's own status line (markdown in the turn cannot stand in for it).
const STATUS = ':scope > section.response > footer.turn-status';

/** Waits until the n-th turn (1-based) has finished and returns its status. */
async function waitDone(page, n, timeout = 90_000) {
  const status = page.locator(`#transcript > article.turn:nth-of-type(${n}) > section.response > footer.turn-status`);
  await page.waitForFunction(
    ([i, sel]) => {
      const el = document.querySelectorAll('#transcript > article.turn')[i - 1];
      const s = el && el.querySelector(sel);
      return Boolean(s) && !['connecting', 'streaming'].includes(s.dataset.status);
    },
    [n, STATUS],
    { timeout },
  );
  return status.getAttribute('data-status');
}

const turn = (page, n) => page.locator('article.turn').nth(n - 1);

// ---- a scripted gateway ------------------------------------------------
// Stands in front of the demo gateway: the routes a test scripts are answered
// by the test (streams with exact timing, refusals, dropped events), every
// other request is passed on. Each request's method, path and headers are kept.

class ScriptedGateway {
  constructor() {
    this.routes = [];
    this.requests = [];
    this.server = null;
    this.url = '';
  }

  /** Answers method + path (a RegExp on the pathname) with handler(req, res, body). */
  on(method, path, handler) {
    this.routes.push({ method, path, handler });
    return this;
  }

  /** The requests seen for method and path. */
  seen(method, path) {
    return this.requests.filter((r) => r.method === method && path.test(r.path));
  }

  async start() {
    const upstream = new URL(baseURL);
    this.server = http.createServer(async (req, res) => {
      const { pathname } = new URL(req.url, 'http://x');
      const chunks = [];
      for await (const c of req) chunks.push(c);
      const body = Buffer.concat(chunks).toString();
      this.requests.push({ method: req.method, path: pathname, headers: req.headers, body });
      const route = this.routes.find((r) => r.method === req.method && r.path.test(pathname));
      if (route) {
        try {
          await route.handler(req, res, body);
        } catch {
          res.destroy();
        }
        return;
      }
      const up = http.request(
        { host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers: req.headers },
        (r) => {
          res.writeHead(r.statusCode, r.headers);
          r.pipe(res);
        },
      );
      up.on('error', () => res.destroy());
      up.end(body);
    });
    await new Promise((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${this.server.address().port}`;
    return this;
  }

  stop() {
    if (!this.server) return undefined;
    this.server.closeAllConnections();
    return new Promise((resolve) => this.server.close(resolve));
  }
}

/** Starts an SSE answer; the returned function writes one event. */
function sse(res, { responseId = 'resp_s1', conversationId = '' } = {}) {
  const headers = { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache', 'X-Docstream-Response-Id': responseId };
  if (conversationId) headers['X-Docstream-Conversation-Id'] = conversationId;
  res.writeHead(200, headers);
  let id = 0;
  return (name, data, { noId = false } = {}) => {
    const line = noId ? '' : `id: ${++id}\n`;
    return new Promise((resolve) => {
      if (res.write(`${line}event: ${name}\ndata: ${JSON.stringify(data)}\n\n`)) resolve();
      else res.once('drain', resolve);
    });
  };
}

function jsonError(res, status, code, message) {
  res.writeHead(status, { 'Content-Type': 'application/json' });
  res.end(JSON.stringify({ error: { code, message } }));
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/**
 * Runs fn(page, gw) against a scripted gateway set up by script(gw). The
 * browser's console notes of the 4xx answers the script gives are not errors.
 */
async function withScript(name, script, fn) {
  const gw = new ScriptedGateway();
  script(gw);
  await gw.start();
  const scripted = (e) => /Failed to load resource: the server responded with a status of 4\d\d/.test(e);
  try {
    await withPage(
      name,
      async (page) => {
        await fn(page, gw);
        page.errors = page.errors.filter((e) => !scripted(e));
      },
      { url: gw.url },
    );
  } finally {
    await gw.stop();
  }
}

/** Starts measuring the page's long tasks (main-thread blocks over 50 ms). */
function watchLongTasks(page) {
  return page.evaluate(() => {
    window.__longTasks = [];
    new PerformanceObserver((list) => {
      for (const e of list.getEntries()) window.__longTasks.push(e.duration);
    }).observe({ type: 'longtask' });
  });
}

// ---- tests --------------------------------------------------------------

test('tour: every document type renders live', { timeout: 120_000 }, async () => {
  tourPage = await withPage(
    'tour',
    async (page) => {
      await page.locator('#simulator-badge').waitFor({ state: 'visible', timeout: 10_000 });
      await page.check('#thinking');
      await sendPrompt(page, 'tour');
      assert.equal(await waitDone(page, 1), 'completed');

      const t = turn(page, 1);
      for (const type of TOUR_TYPES) {
        const n = await t.locator(`[data-doc-type="${type}"]`).count();
        assert.ok(n >= 1, `no ${type} document in the DOM`);
      }
      // every document element carries its id
      const ids = await t.locator('[data-doc-type]').evaluateAll((els) => els.map((e) => e.dataset.docId));
      assert.ok(ids.every((id) => /^doc_\d+$/.test(id)), `document ids: ${ids.join(', ')}`);
      assert.equal(new Set(ids).size, ids.length, 'a document was rendered twice');

      // code_reference caption
      const captions = await t.locator('[data-doc-type="code_reference"] .ref-caption').allTextContents();
      assert.ok(captions.some((c) => c.trim().endsWith('src/main.py:12-14')), `code reference captions: ${captions}`);

      // code_block: highlighted, with its language label
      const langs = await t.locator('[data-doc-type="code_block"] .lang').allTextContents();
      assert.ok(langs.includes('python') && langs.includes('bash'), `code block languages: ${langs}`);
      assert.ok((await t.locator('[data-doc-type="code_block"] code.hljs span[class^="hljs-"]').count()) > 0, 'code blocks are not highlighted');

      // terminal_command: a successful command with exit code 0 and a rejected one
      const ok = t.locator('[data-doc-type="terminal_command"][data-exit-code="0"]');
      assert.ok((await ok.count()) >= 1, 'no terminal command with exit code 0');
      assert.match(await ok.first().locator('.term-command').textContent(), /\S/);
      assert.match(await ok.first().locator('.exit-code').textContent(), /exit 0/);
      assert.ok((await t.locator('[data-doc-type="terminal_command"][data-rejected="true"] .badge.rejected').count()) >= 1, 'no rejected terminal command');
      assert.ok((await t.locator('[data-doc-type="terminal_command"]').count()) >= 4, 'the parallel shells are missing');

      // file_edit: create, edit (a diff view with additions and removals), delete
      for (const op of ['create', 'edit', 'delete']) {
        assert.ok((await t.locator(`[data-doc-type="file_edit"][data-operation="${op}"]`).count()) >= 1, `no file_edit ${op}`);
      }
      const edit = t.locator('[data-doc-type="file_edit"][data-operation="edit"]').first();
      assert.ok((await edit.locator('table.diff tr.d-add').count()) >= 1, 'the edit diff has no added line');
      assert.ok((await edit.locator('table.diff tr.d-del').count()) >= 1, 'the edit diff has no removed line');
      assert.match(await edit.locator('.op').textContent(), /edit/);

      // plan: todos with dependencies; the todo_update ticked "config"
      const plan = t.locator('[data-doc-type="plan"]').first();
      assert.ok((await plan.locator('li.todo').count()) >= 2, 'the plan has no todos');
      assert.equal(await plan.locator('li.todo[data-todo-id="config"]').getAttribute('data-status'), 'completed', 'the todo_update did not tick the plan todo');
      assert.equal(await plan.locator('li.todo[data-todo-id="cli"]').getAttribute('data-status'), 'in_progress');
      assert.match(await plan.locator('li.todo[data-todo-id="cli"] .deps').textContent(), /after: config/);
      assert.match(await t.locator('[data-doc-type="todo_update"]').first().textContent(), /completed/);

      // clarification: one button per option
      assert.ok((await t.locator('[data-doc-type="clarification"] button[data-action="answer"]').count()) >= 2, 'no option buttons');

      // tool calls: collapsible, with name, arguments and result
      const tool = t.locator('[data-doc-type="tool_call"]').first();
      assert.equal(await tool.locator('details').count(), 1);
      assert.match(await tool.locator('.tool-name').textContent(), /\w/);

      // thinking was asked for
      assert.ok((await t.locator('details.thinking').count()) >= 1, 'no thinking block');

      // done: usage and timings
      const statusText = await t.locator(STATUS).textContent();
      assert.match(statusText, /Completed/);
      assert.match(statusText, /total \d/);
      assert.match(statusText, /First document/);
    },
    { keep: true },
  );
});

test('clarification: one choice per question, every answer and the note sent in one turn', { timeout: 120_000 }, async () => {
  await withPage('clarification', async (page) => {
    const posts = watchPosts(page);
    await sendPrompt(page, 'ask');
    assert.equal(await waitDone(page, 1), 'completed');
    const conversationId = await page.evaluate(() => window.__docstream.conversationId);
    assert.ok(conversationId, 'no conversation id after the first turn');

    const clar = turn(page, 1).locator('[data-doc-type="clarification"]');
    assert.equal(await clar.locator('fieldset.question').count(), 2, 'the ask scenario asks two questions');
    const option = (q, o) => clar.locator(`button[data-action="answer"][data-question-id="${q}"][data-option-id="${o}"]`);
    const send = clar.locator('button[data-action="send-answers"]');
    const hint = clar.locator('[data-role="answer-hint"]');
    assert.equal((await send.textContent()).trim(), 'Send answers');
    assert.ok(await send.isDisabled(), 'Send answers is enabled before any choice');
    assert.match(await hint.textContent(), /2 of 2 left/);

    // the first choice sends nothing
    await option('q1', 'jwt').click();
    await page.waitForFunction(() => document.querySelector('[data-doc-type="clarification"] button[data-option-id="jwt"]').getAttribute('aria-pressed') === 'true');
    await settle(page);
    assert.equal(posts.length, 1, 'a choice sent a turn');
    assert.equal(await page.locator('article.turn').count(), 1);
    assert.ok(await send.isDisabled(), 'Send answers is enabled with a question open');
    assert.match(await hint.textContent(), /1 of 2 left/);

    // a choice from the keyboard keeps the focus on its option
    await option('q2', 'sqlite').focus();
    await page.keyboard.press('Space');
    await page.waitForFunction(() => {
      const b = document.activeElement;
      return b && b.dataset.optionId === 'sqlite' && b.getAttribute('aria-pressed') === 'true';
    });
    assert.ok(await send.isEnabled(), 'Send answers is disabled with every question answered');

    // another option of the same question replaces the first choice
    await option('q1', 'session').click();
    await page.waitForFunction(() => document.querySelector('[data-doc-type="clarification"] button[data-option-id="session"]').getAttribute('aria-pressed') === 'true');
    assert.equal(await option('q1', 'jwt').getAttribute('aria-pressed'), 'false');
    assert.equal(await clar.locator('button[aria-pressed="true"]').count(), 2);

    const marker = `note-${Date.now().toString(36)}`;
    const note = `Keep sessions for 30 days (${marker}).`;
    await clar.locator('textarea[data-action="note"]').fill(note);

    const sessionLabel = (await option('q1', 'session').textContent()).trim();
    const sqliteLabel = (await option('q2', 'sqlite').textContent()).trim();
    const posted = page.waitForRequest((req) => req.method() === 'POST' && new URL(req.url()).pathname === '/v1/chat');
    await send.click();
    const body = JSON.parse((await posted).postData());
    assert.deepEqual(body.answers, [
      { questionId: 'q1', optionId: 'session' },
      { questionId: 'q2', optionId: 'sqlite' },
    ]);
    assert.equal(body.prompt, note);
    assert.equal(body.conversationId, conversationId);
    assert.equal(body.stream, true);

    assert.equal(await waitDone(page, 2), 'completed');
    assert.equal(posts.length, 2, 'the answers took more than one turn');
    const second = turn(page, 2);
    const bubble = await second.locator('.user-msg .bubble').textContent();
    for (const want of [sessionLabel, sqliteLabel, note]) assert.ok(bubble.includes(want), `the answer turn does not show "${want}":\n${bubble}`);
    // the simulator quotes the prompt the gateway made of the answers and the note
    const answerText = (await second.locator('[data-doc-type="text"]').allTextContents()).join('\n');
    for (const want of [sessionLabel, sqliteLabel, marker]) assert.ok(answerText.includes(want), `the follow-up does not name "${want}":\n${answerText}`);

    // the form is answered and locked
    assert.match(await clar.locator('.answered').textContent(), /Answered/);
    assert.equal(await send.count(), 0);
    assert.equal(await option('q1', 'session').getAttribute('aria-pressed'), 'true');
    for (const [q, o] of [['q1', 'jwt'], ['q1', 'session'], ['q2', 'postgres'], ['q2', 'sqlite']]) {
      assert.ok(await option(q, o).isDisabled(), `${q}/${o} is still enabled`);
    }

    // one agent run got both answers and the note
    if (simLog) {
      const runs = (await simStarts()).filter((e) => e.prompt.includes(marker));
      assert.equal(runs.length, 1, `agent runs with the note: ${runs.length}`);
      const { prompt, argv } = runs[0];
      assert.ok(prompt.includes(`Which authentication method should the API use?: ${sessionLabel}`), prompt);
      assert.ok(prompt.includes(`Where should user records be stored?: ${sqliteLabel}`), prompt);
      assert.ok(argv.includes(conversationId), `the answers did not resume the conversation: ${argv.join(' ')}`);
    }
  });
});

test('clarification: a single question uses the same form; a refused answer opens it again', { timeout: 60_000 }, async () => {
  let chats = 0;
  await withScript(
    'clarification-single',
    (gw) =>
      gw.on('POST', /^\/v1\/chat$/, async (req, res) => {
        chats++;
        if (chats === 2) return jsonError(res, 409, 'conversation_busy', 'the previous turn still runs');
        const send = sse(res, { responseId: `resp_s${chats}`, conversationId: 'conv_s1' });
        await send('response_start', { id: `resp_s${chats}`, conversationId: 'conv_s1' });
        if (chats === 1) {
          const questions = [{ id: 'q1', text: 'Which auth?', options: [{ id: 'jwt', label: 'JWT' }, { id: 'session', label: 'Session' }] }];
          await send('document_start', { id: 'doc_001', type: 'clarification', sequence: 1, metadata: { questions } });
          await send('document_end', { documentId: 'doc_001', metadata: { questions } });
        } else {
          await send('document_start', { id: 'doc_001', type: 'text', sequence: 1, metadata: {} });
          await send('document_end', { documentId: 'doc_001', finalContent: 'JWT it is.' });
        }
        await send('done', { id: `resp_s${chats}`, conversationId: 'conv_s1', status: 'completed' });
        res.end();
      }),
    async (page, gw) => {
      const posts = watchPosts(page);
      await sendPrompt(page, 'ask one');
      assert.equal(await waitDone(page, 1), 'completed');
      const clar = turn(page, 1).locator('[data-doc-type="clarification"]');
      const send = clar.locator('button[data-action="send-answers"]');
      assert.equal((await send.textContent()).trim(), 'Send answer');
      assert.ok(await send.isDisabled());

      await clar.locator('button[data-option-id="jwt"]').click();
      await page.waitForFunction(() => !document.querySelector('[data-doc-type="clarification"] button[data-action="send-answers"]').disabled);
      await settle(page);
      assert.equal(posts.length, 1, 'the choice sent a turn');

      // refused: the form is open again with the choice kept and the reason shown
      await send.click();
      assert.equal(await waitDone(page, 2), 'error');
      await clar.locator('.answer-problem').waitFor();
      assert.match(await clar.locator('.answer-problem').textContent(), /the previous turn still runs/);
      assert.equal(await clar.locator('button[data-option-id="jwt"]').getAttribute('aria-pressed'), 'true');

      // Ctrl+Enter in the note sends the form too
      await clar.locator('textarea[data-action="note"]').press('Control+Enter');
      assert.equal(await waitDone(page, 3), 'completed');
      const bodies = gw.seen('POST', /^\/v1\/chat$/).map((r) => JSON.parse(r.body));
      assert.equal(bodies.length, 3);
      for (const body of bodies.slice(1)) {
        assert.deepEqual(body.answers, [{ questionId: 'q1', optionId: 'jwt' }]);
        assert.equal(body.prompt, undefined, 'an empty note was sent');
        assert.equal(body.conversationId, 'conv_s1');
      }
      assert.match(await clar.locator('.answered').textContent(), /Answered/);
    },
  );
});

test('cancel: the stream ends with a CANCELLED error document', { timeout: 120_000 }, async () => {
  await withPage('cancel', async (page) => {
    await sendPrompt(page, 'long:400');
    await page.waitForFunction(() => {
      const el = document.querySelector('article.turn [data-doc-type="text"]');
      return el && el.textContent.includes('Paragraph 1 of 400');
    }, null, { timeout: 30_000 });
    await page.click('#cancel');
    assert.equal(await waitDone(page, 1), 'error');
    const t = turn(page, 1);
    const error = t.locator('[data-doc-type="error"]');
    assert.ok((await error.count()) >= 1, 'no error document');
    assert.match(await error.last().locator('.err-code').textContent(), /CANCELLED/);
    const text = await t.locator('[data-doc-type="text"]').first().textContent();
    assert.ok(!text.includes('Paragraph 400 of 400'), 'the run was not cut short');
    assert.ok(text.includes('Paragraph 1 of 400'), 'the text already sent was dropped');
    assert.match(await t.locator(STATUS).textContent(), /cancelled/i);
    assert.ok(await page.locator('#send').isEnabled(), 'Send stays disabled after the run ended');
  });
});

test('re-attach: a dropped connection resumes without duplicates', { timeout: 120_000 }, async () => {
  await withPage('reattach', async (page) => {
    const reattached = [];
    page.on('request', (req) => {
      if (/\/v1\/chat\/[^/]+\/stream$/.test(new URL(req.url()).pathname)) reattached.push(req.headers()['last-event-id']);
    });
    await sendPrompt(page, 'long:60');
    const waitText = (s) =>
      page.waitForFunction((needle) => {
        const el = document.querySelector('article.turn [data-doc-type="text"]');
        return el && el.textContent.includes(needle);
      }, s, { timeout: 30_000 });

    await waitText('Paragraph 3 of 60');
    await page.evaluate(() => window.__docstream.abortStream());
    await turn(page, 1).locator('.conn').waitFor({ state: 'visible', timeout: 5_000 });

    await waitText('Paragraph 12 of 60');
    await page.evaluate(() => window.__docstream.abortStream());

    assert.equal(await waitDone(page, 1), 'completed');
    assert.ok(reattached.length >= 2, `expected two re-attach requests, saw ${reattached.length}`);
    for (const id of reattached) assert.ok(Number(id) > 0, `re-attached with Last-Event-ID ${id}`);
    assert.ok(await turn(page, 1).locator('.conn').isHidden(), 'the reconnecting indicator stayed');

    const texts = await turn(page, 1).locator('[data-doc-type="text"]').allTextContents();
    const all = texts.join('\n');
    for (let i = 1; i <= 60; i++) {
      const n = all.split(`Paragraph ${i} of 60.`).length - 1;
      assert.equal(n, 1, `paragraph ${i} appears ${n} times`);
    }
    const ids = await turn(page, 1).locator('[data-doc-type]').evaluateAll((els) => els.map((e) => e.dataset.docId));
    assert.equal(new Set(ids).size, ids.length, 'a document was rendered twice');
  });
});

test('screenshot of the tour', { timeout: 60_000 }, async () => {
  let page = tourPage;
  if (!page || page.isClosed()) {
    page = await openPlayground();
    await sendPrompt(page, 'tour');
    await waitDone(page, 1);
  }
  // one tool call opened, as a person exploring the answer would
  const glob = page.locator('[data-doc-type="tool_call"]', { has: page.locator('.tool-name', { hasText: 'glob' }) });
  const tool = (await glob.count()) ? glob.first() : page.locator('[data-doc-type="tool_call"]').first();
  await tool.locator('summary').click();
  // A viewport as tall as the page puts the sticky header and composer where
  // a person sees them: at the top and at the bottom.
  const fullPage = async (file) => {
    const height = await page.evaluate(() => document.documentElement.scrollHeight);
    await page.setViewportSize({ width: 1280, height: Math.min(height, 16_000) });
    await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => r())));
    await page.screenshot({ path: path.join(artifacts, file), fullPage: true });
    await page.setViewportSize({ width: 1280, height: 900 });
  };
  await fullPage('playground.png');
  await page.emulateMedia({ colorScheme: 'dark' });
  await fullPage('playground-dark.png');
  await page.close();
});

// ---- defects found by an outside tester -----------------------------------

test('long output: 2 MB of markdown and a 1 MB code block leave the page responsive', { timeout: 180_000 }, async () => {
  const para = (i) => `Paragraph ${i}. ${'word '.repeat(800).slice(0, 4000 - 20)}\n\n`.slice(0, 4096);
  const text = Array.from({ length: 500 }, (_, i) => para(i + 1)).join('');
  const line = (i) => `x_${i} = compute(${i}, "value") + other_value  # comment ${i}`.padEnd(63, ' ') + '\n';
  const code = Array.from({ length: 16_384 }, (_, i) => line(i)).join('');
  let elapsed = 0;
  await withScript(
    'long-output',
    (gw) =>
      gw.on('POST', /^\/v1\/chat$/, async (req, res) => {
        const send = sse(res);
        const started = Date.now();
        await send('response_start', { id: 'resp_s1', conversationId: 'conv_s1', model: 'auto', mode: 'agent' });
        await send('document_start', { id: 'doc_001', type: 'text', sequence: 1, metadata: { format: 'markdown' } });
        for (let i = 0; i < text.length; i += 4096) {
          await send('content_delta', { documentId: 'doc_001', delta: text.slice(i, i + 4096) });
          await sleep(20);
        }
        await send('document_end', { documentId: 'doc_001', finalContent: text, metadata: { format: 'markdown' } });
        await send('document_start', { id: 'doc_002', type: 'code_block', sequence: 2, metadata: { language: 'python' } });
        for (let i = 0; i < code.length; i += 4096) {
          await send('content_delta', { documentId: 'doc_002', delta: code.slice(i, i + 4096) });
          await sleep(20);
        }
        await send('document_end', { documentId: 'doc_002', finalContent: code, metadata: { language: 'python' } });
        await send('done', { id: 'resp_s1', conversationId: 'conv_s1', status: 'completed', usage: { reported: false } });
        elapsed = Date.now() - started;
        res.end();
      }),
    async (page) => {
      await watchLongTasks(page);
      const t0 = Date.now();
      await sendPrompt(page, 'much');
      assert.equal(await waitDone(page, 1, 120_000), 'completed');
      const total = Date.now() - t0;
      const tasks = await page.evaluate(() => window.__longTasks);
      const blocked = tasks.reduce((a, b) => a + b, 0);
      console.log(`long output: blocked ${Math.round(blocked)} ms in ${tasks.length} long tasks (longest ${Math.round(Math.max(...tasks))} ms); sent in ${elapsed} ms, turn took ${total} ms`);
      // A page that re-renders the whole document per delta is busy for most
      // of the stream; a paced one leaves the main thread mostly free.
      assert.ok(blocked < 0.5 * elapsed, `the main thread was blocked for ${Math.round(blocked)} ms of the ${elapsed} ms the stream took`);
      assert.ok(total < elapsed + 5_000, `the turn took ${total} ms, the stream was sent in ${elapsed} ms`);
      const shown = await turn(page, 1).locator('[data-doc-type="text"]').evaluate((el) => el.textContent);
      for (const i of [1, 2, 250, 499, 500]) assert.equal(shown.split(`Paragraph ${i}.`).length - 1, 1, `paragraph ${i}`);
      assert.equal(shown.split('Paragraph ').length - 1, 500);
      const codeShown = await turn(page, 1).locator('[data-doc-type="code_block"] pre.code code').evaluate((el) => el.textContent);
      assert.equal(codeShown, code.replace(/\n$/, ''), 'the code block is not exact');
    },
  );
});

test('thinking: 20,000 deltas stream in linear time', { timeout: 120_000 }, async () => {
  const words = Array.from({ length: 20_000 }, (_, i) => `w${i} `);
  await withScript(
    'thinking',
    (gw) =>
      gw.on('POST', /^\/v1\/chat$/, async (req, res) => {
        const send = sse(res);
        await send('response_start', { id: 'resp_s1', conversationId: 'conv_s1' });
        for (let i = 0; i < words.length; i++) {
          await send('thinking_delta', { delta: words[i] });
          if (i % 100 === 99) await sleep(5);
        }
        await send('document_start', { id: 'doc_001', type: 'text', sequence: 1, metadata: {} });
        await send('document_end', { documentId: 'doc_001', finalContent: 'Thought it through.' });
        await send('done', { id: 'resp_s1', conversationId: 'conv_s1', status: 'completed' });
        res.end();
      }),
    async (page) => {
      await watchLongTasks(page);
      await sendPrompt(page, 'think');
      assert.equal(await waitDone(page, 1, 100_000), 'completed');
      const blocked = await page.evaluate(() => window.__longTasks.reduce((a, b) => a + b, 0));
      console.log(`thinking: blocked ${Math.round(blocked)} ms`);
      assert.ok(blocked < 1_500, `the main thread was blocked for ${Math.round(blocked)} ms`);
      const shown = await turn(page, 1).locator('details.thinking .thinking-body').evaluate((el) => el.textContent);
      assert.equal(shown, words.join(''));
    },
  );
});

test('burst: 1,500 documents sent at once render without freezing the page, text exact', { timeout: 180_000 }, async () => {
  // a reload or re-attach replays the whole log like this
  const N = 750; // iterations of [text in 5-character deltas, tool_call or code_block, thinking]
  const texts = [];
  const codes = [];
  let elapsed = 0;
  await withScript(
    'burst',
    (gw) =>
      gw.on('POST', /^\/v1\/chat$/, async (req, res) => {
        // the whole stream in a few writes, as a replay of the log arrives
        res.writeHead(200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache', 'X-Docstream-Response-Id': 'resp_s1' });
        const events = [];
        const send = (name, data) => events.push(`id: ${events.length + 1}\nevent: ${name}\ndata: ${JSON.stringify(data)}\n\n`);
        const started = Date.now();
        send('response_start', { id: 'resp_s1', conversationId: 'conv_s1', model: 'auto', mode: 'agent' });
        let seq = 0;
        for (let i = 0; i < N; i++) {
          const id = `doc_${++seq}`;
          const text = `Step ${i}: looked at the **file** number ${i} and found it fine. `;
          texts.push(text);
          send('document_start', { id, type: 'text', sequence: seq, metadata: { format: 'markdown' } });
          for (let k = 0; k < text.length; k += 5) send('content_delta', { documentId: id, delta: text.slice(k, k + 5) });
          send('document_end', { documentId: id, finalContent: text, metadata: { format: 'markdown' } });
          send('thinking_delta', { delta: `thought ${i} ` });
          const other = `doc_${++seq}`;
          if (i % 2) {
            const code = `x_${i} = compute(${i})\nprint(x_${i})`;
            codes.push(code);
            send('document_start', { id: other, type: 'code_block', sequence: seq, metadata: { language: 'python' } });
            for (let k = 0; k < code.length; k += 5) send('content_delta', { documentId: other, delta: code.slice(k, k + 5) });
            send('document_end', { documentId: other, finalContent: code, metadata: { language: 'python' } });
          } else {
            send('document_start', { id: other, type: 'tool_call', sequence: seq, metadata: {} });
            send('tool_call_start', { documentId: other, toolName: 'read_file', toolCallId: `call_${i}` });
            send('tool_call_arguments', { documentId: other, arguments: { path: `src/file_${i}.go` } });
            send('tool_result', { documentId: other, result: { status: 'success', data: `contents ${i}` } });
            send('document_end', { documentId: other, metadata: { toolName: 'read_file', result: { status: 'success', data: `contents ${i}` } } });
          }
        }
        send('done', { id: 'resp_s1', conversationId: 'conv_s1', status: 'completed', usage: { reported: false } });
        const body = events.join('');
        for (let k = 0; k < body.length; k += 256 * 1024) {
          if (!res.write(body.slice(k, k + 256 * 1024))) await new Promise((r) => res.once('drain', r));
        }
        elapsed = Date.now() - started;
        res.end();
      }),
    async (page) => {
      await watchLongTasks(page);
      const t0 = Date.now();
      await sendPrompt(page, 'burst');
      assert.equal(await waitDone(page, 1, 150_000), 'completed');
      const total = Date.now() - t0;
      const tasks = await page.evaluate(() => window.__longTasks);
      const longest = Math.max(0, ...tasks);
      const blocked = tasks.reduce((a, b) => a + b, 0);
      console.log(`burst: ${2 * N} documents sent in ${elapsed} ms; longest task ${Math.round(longest)} ms, ${tasks.length} long tasks, blocked ${Math.round(blocked)} ms; turn took ${total} ms`);
      assert.ok(longest < 2_000, `a ${Math.round(longest)} ms task froze the page`);
      const t = turn(page, 1);
      assert.equal(await t.locator('.doc').count(), 2 * N);
      const shownTexts = await t.locator('[data-doc-type="text"]').evaluateAll((els) => els.map((e) => e.textContent));
      assert.deepEqual(shownTexts.map((s) => s.trim()), texts.map((s) => s.replace(/\*\*/g, '').trim()));
      const shownCodes = await t.locator('[data-doc-type="code_block"] pre.code code').evaluateAll((els) => els.map((e) => e.textContent));
      assert.deepEqual(shownCodes, codes);
      const seqs = await t.locator('.doc').evaluateAll((els) => els.map((e) => Number(e.dataset.sequence)));
      assert.deepEqual(seqs, Array.from({ length: 2 * N }, (_, i) => i + 1), 'documents out of order');
      assert.equal(await t.locator('[data-doc-type="tool_call"] .tool-name').count(), N / 2);
    },
  );
});

test('terminal output: ANSI escape sequences are not shown', { timeout: 60_000 }, async () => {
  const output = '\x1b[31mred\x1b[0m plain \x1b]8;;https://example.com\x07link\x1b]8;;\x07 \x1b[2J\x1b[1;32mgreen\x1b[m\r\nnext\tline\x07\x00';
  await withScript(
    'ansi',
    (gw) =>
      gw.on('POST', /^\/v1\/chat$/, async (req, res) => {
        const send = sse(res);
        await send('response_start', { id: 'resp_s1', conversationId: 'conv_s1' });
        await send('document_start', { id: 'doc_001', type: 'terminal_command', sequence: 1, metadata: { command: 'ls --color' } });
        await send('document_end', { documentId: 'doc_001', metadata: { command: 'ls --color', exitCode: 0, output } });
        await send('done', { id: 'resp_s1', conversationId: 'conv_s1', status: 'completed' });
        res.end();
      }),
    async (page) => {
      await sendPrompt(page, 'ansi');
      assert.equal(await waitDone(page, 1), 'completed');
      const shown = await turn(page, 1).locator('.term-output').textContent();
      assert.equal(shown, 'red plain link green\nnext\tline');
    },
  );
});

test('status: a notice shows while the agent reconnects and goes when text resumes', { timeout: 60_000 }, async () => {
  let release;
  const gate = new Promise((r) => (release = r));
  await withScript(
    'status',
    (gw) =>
      gw.on('POST', /^\/v1\/chat$/, async (req, res) => {
        const send = sse(res);
        await send('response_start', { id: 'resp_s1', conversationId: 'conv_s1' });
        await send('status', { state: 'reconnecting', attempt: 2 });
        await gate;
        await send('document_start', { id: 'doc_001', type: 'text', sequence: 1, metadata: { format: 'markdown' } });
        await send('content_delta', { documentId: 'doc_001', delta: 'Back again.' });
        await send('document_end', { documentId: 'doc_001', finalContent: 'Back again.', metadata: { format: 'markdown' } });
        await send('done', { id: 'resp_s1', conversationId: 'conv_s1', status: 'completed' });
        res.end();
      }),
    async (page) => {
      await sendPrompt(page, 'reconnect');
      const notice = turn(page, 1).locator('.agent-status');
      await notice.waitFor({ state: 'visible', timeout: 20_000 });
      assert.equal(await notice.textContent(), 'Reconnecting (attempt 2)…');
      release();
      assert.equal(await waitDone(page, 1), 'completed');
      assert.equal(await notice.isVisible(), false);
      assert.match(await turn(page, 1).locator('[data-doc-type="text"]').textContent(), /Back again\./);
    },
  );
});

test('sanitizing: agent markdown cannot style the page, add forms or answer a question', { timeout: 60_000 }, async () => {
  const markdown = [
    'Hello <span style="color:red" data-x="1">styled</span>',
    '',
    '<style>body { display: none }</style>',
    '',
    '<form action="/v1/chat"><input name="a"><textarea>t</textarea><select><option>o</option></select><button type="submit">Go</button></form>',
    '',
    '<button data-action="answer" data-question-id="q1" data-option-id="jwt">Forged answer</button>',
    '',
    '- [x] done task',
    '- [ ] open task',
    '',
    // imitations of the page's own UI: a "You" message, an error box, a status line, hidden text, duplicate ids
    '<div class="user-msg" id="prompt"><div class="who">You</div><div class="bubble">fake prompt</div></div>',
    '',
    '<div class="request-error" role="alert"><strong>fake gateway error</strong></div>',
    '',
    '<footer class="turn-status" data-status="completed"><span class="status-badge s-completed">Completed</span></footer>',
    '',
    '<p hidden id="transcript">hidden text</p>',
    '',
    '<p class="hljs-keyword md-code visually-hidden">mixed classes</p>',
    '',
    '```js',
    'const x = class A extends B {};',
    '```',
  ].join('\n');
  await withScript(
    'sanitize',
    (gw) =>
      gw.on('POST', /^\/v1\/chat$/, async (req, res) => {
        const send = sse(res);
        await send('response_start', { id: 'resp_s1', conversationId: 'conv_s1' });
        await send('document_start', { id: 'doc_001', type: 'text', sequence: 1, metadata: {} });
        await send('document_end', { documentId: 'doc_001', finalContent: markdown });
        const questions = [{ id: 'q1', text: 'Which auth?', options: [{ id: 'jwt', label: 'JWT' }, { id: 'session', label: 'Session' }] }];
        await send('document_start', { id: 'doc_002', type: 'clarification', sequence: 2, metadata: { questions } });
        await send('document_end', { documentId: 'doc_002', metadata: { questions } });
        await send('done', { id: 'resp_s1', conversationId: 'conv_s1', status: 'completed' });
        res.end();
      }),
    async (page, gw) => {
      const posts = watchPosts(page);
      await sendPrompt(page, 'html');
      assert.equal(await waitDone(page, 1), 'completed');
      const doc = turn(page, 1).locator('[data-doc-type="text"]');
      assert.match(await doc.textContent(), /styled/);
      for (const tag of ['style', 'form', 'input', 'textarea', 'select', 'button']) {
        assert.equal(await doc.locator(tag).count(), 0, `a <${tag}> from the stream is in the page`);
      }
      assert.equal(await doc.locator('[style]').count(), 0, 'a style attribute from the stream is in the page');
      const dataAttrs = await doc.evaluate((el) => [...el.querySelectorAll('*')].flatMap((e) => e.getAttributeNames().filter((n) => n.startsWith('data-'))));
      assert.deepEqual(dataAttrs, [], 'data attributes from the stream are in the page');
      assert.notEqual(await page.evaluate(() => getComputedStyle(document.body).display), 'none');
      assert.equal(await doc.locator('li').count(), 2, 'the task list lost its items');
      assert.equal(await doc.locator('.task-box').count(), 2, 'the task boxes lost their class');
      assert.equal(await doc.locator('[id]').count(), 0, 'an id from the stream is in the page');
      assert.equal(await doc.locator('[hidden]').count(), 0, 'a hidden attribute from the stream is in the page');
      assert.equal(await page.locator('#prompt').count(), 1, 'a duplicate id');
      for (const cls of ['user-msg', 'who', 'bubble', 'request-error', 'turn-status', 'status-badge', 's-completed', 'visually-hidden']) {
        assert.equal(await doc.locator(`.${cls}`).count(), 0, `class ${cls} from the stream is in the page`);
      }
      assert.equal(await page.locator('.user-msg').count(), 1, 'a fake "You" message');
      assert.equal(await page.locator('.request-error').count(), 0, 'a fake gateway error');
      assert.equal(await page.locator('.turn-status').count(), 1, 'a fake status line');
      assert.equal(await doc.locator('p.hljs-keyword.md-code').count(), 1, "the renderer's own classes were dropped");
      assert.equal(await doc.locator('pre.md-code > code.hljs.language-js .hljs-keyword').count() > 0, true, 'the fenced code lost its highlighting');
      assert.ok((await doc.locator('pre.md-code .hljs-title.class_').count()) > 0, 'a highlight.js tiered class was dropped');

      // A forged button that got past the sanitizer still answers nothing.
      await doc.evaluate((el) => {
        const b = document.createElement('button');
        b.dataset.action = 'answer';
        b.dataset.questionId = 'q1';
        b.dataset.optionId = 'jwt';
        b.textContent = 'Forged';
        b.id = 'forged';
        el.append(b);
      });
      await page.click('#forged');
      await settle(page);
      assert.equal(posts.length, 1, 'the forged button sent an answer');
      assert.equal(await page.locator('article.turn').count(), 1);
      // the playground's own option still answers
      const option = turn(page, 1).locator('[data-doc-type="clarification"] button[data-option-id="session"]');
      assert.equal(await option.isEnabled(), true);
      // The sanitizer parses the markup in an inert document, where the page's
      // Content-Security-Policy refuses (and reports) the inline styles before
      // they are removed.
      page.errors = page.errors.filter((e) => !/Content Security Policy directive 'style-src/.test(e));
    },
  );
});

test('readiness: a /readyz the ingress does not route is not "not ready"', { timeout: 60_000 }, async () => {
  await withScript(
    'readyz',
    (gw) =>
      gw.on('GET', /^\/readyz$/, (req, res) => {
        res.writeHead(404, { 'Content-Type': 'text/plain' });
        res.end('404 page not found');
      }),
    async (page) => {
      await page.waitForFunction(() => document.querySelector('#ready .ready-text').textContent !== 'checking…');
      const text = await page.locator('#ready .ready-text').textContent();
      assert.doesNotMatch(text, /not ready/);
      assert.equal(await page.locator('#ready').getAttribute('data-ready'), 'unknown');
      await sendPrompt(page, 'long:3');
      assert.equal(await waitDone(page, 1), 'completed');
    },
  );
});

test('readiness: a gateway whose store writes fail shows "degraded", with the error', { timeout: 60_000 }, async () => {
  await withScript(
    'degraded',
    (gw) =>
      gw.on('GET', /^\/readyz$/, (req, res) => {
        res.writeHead(200, { 'Content-Type': 'application/json' });
        res.end(JSON.stringify({ status: 'degraded', agent: { binary: '/usr/bin/agent', simulator: false }, store: 'the last write failed: disk I/O error' }));
      }),
    async (page) => {
      await page.waitForFunction(() => document.querySelector('#ready .ready-text').textContent !== 'checking…');
      assert.equal(await page.locator('#ready .ready-text').textContent(), 'degraded');
      assert.equal(await page.locator('#ready').getAttribute('data-ready'), 'degraded');
      assert.match(await page.locator('#ready').getAttribute('title'), /disk I\/O error/);
    },
  );
});

test('events_dropped: a client that fell behind shows the finished response', { timeout: 60_000 }, async () => {
  const final = 'All of the answer, as the run finished it.';
  let polls = 0;
  const response = (status) => ({
    id: 'resp_s1',
    conversationId: 'conv_s1',
    status,
    documents: [{ id: 'doc_001', type: 'text', sequence: 1, content: status === 'streaming' ? 'All of' : final, metadata: {} }],
  });
  await withScript(
    'events-dropped',
    (gw) =>
      gw
        .on('POST', /^\/v1\/chat$/, async (req, res) => {
          const send = sse(res, { conversationId: 'conv_s1' });
          await send('response_start', { id: 'resp_s1', conversationId: 'conv_s1' });
          await send('document_start', { id: 'doc_001', type: 'text', sequence: 1, metadata: {} });
          await send('content_delta', { documentId: 'doc_001', delta: 'All of' });
          await send('error', { code: 'events_dropped', message: 'the client fell behind' }, { noId: true });
          res.end();
        })
        .on('GET', /^\/v1\/chat\/resp_s1\/stream$/, (req, res) => jsonError(res, 410, 'events_dropped', 'the log no longer holds these events'))
        .on('GET', /^\/v1\/chat\/resp_s1$/, (req, res) => {
          polls++;
          res.writeHead(200, { 'Content-Type': 'application/json' });
          res.end(JSON.stringify(response(polls < 3 ? 'streaming' : 'completed')));
        }),
    async (page, gw) => {
      await sendPrompt(page, 'fall behind');
      assert.equal(await waitDone(page, 1, 40_000), 'completed');
      assert.equal((await turn(page, 1).locator('[data-doc-type="text"]').textContent()).trim(), final);
      assert.ok(polls >= 3, `GET /v1/chat/resp_s1 ${polls} times`);
      for (const r of gw.seen('GET', /^\/v1\/chat\/resp_s1/)) {
        assert.equal(r.headers['x-docstream-conversation-id'], 'conv_s1', `${r.path} without the conversation header`);
      }
    },
  );
});

test('refused: the prompt stays in the composer', { timeout: 60_000 }, async () => {
  await withScript(
    'refused',
    (gw) => gw.on('POST', /^\/v1\/chat$/, (req, res) => jsonError(res, 429, 'rate_limited', 'too many requests')),
    async (page) => {
      await sendPrompt(page, 'please keep me');
      assert.equal(await waitDone(page, 1), 'error');
      assert.match(await turn(page, 1).textContent(), /429/);
      assert.equal(await page.inputValue('#prompt'), 'please keep me');
    },
  );
});

test('new conversation while a turn streams: the next prompt starts a new one', { timeout: 120_000 }, async () => {
  await withPage('new-conversation', async (page) => {
    await sendPrompt(page, 'long:20');
    await page.waitForFunction(() => window.__docstream.conversationId);
    await page.click('#new-conversation');
    assert.equal(await waitDone(page, 1), 'completed');
    assert.equal(await page.evaluate(() => window.__docstream.conversationId), null);
    assert.equal(await page.locator('#conversation-id').textContent(), 'new');
    const posted = page.waitForRequest((req) => req.method() === 'POST' && new URL(req.url()).pathname === '/v1/chat');
    await sendPrompt(page, 'long:2');
    const req = await posted;
    assert.equal(JSON.parse(req.postData()).conversationId, undefined);
    assert.equal(req.headers()['x-docstream-conversation-id'], undefined);
    assert.equal(await waitDone(page, 2), 'completed');
  });
});

test('sticky routing: requests about a conversation carry X-Docstream-Conversation-Id', { timeout: 120_000 }, async () => {
  const gw = await new ScriptedGateway().start();
  try {
    await withPage(
      'sticky',
      async (page) => {
        await sendPrompt(page, 'long:2');
        assert.equal(await waitDone(page, 1), 'completed');
        const conv = await page.evaluate(() => window.__docstream.conversationId);
        assert.ok(conv);
        assert.equal(gw.seen('POST', /^\/v1\/chat$/)[0].headers['x-docstream-conversation-id'], undefined, 'the first turn has no conversation yet');

        // a follow-up, re-attached after a drop, then cancelled
        await sendPrompt(page, 'long:400');
        await page.waitForFunction(() => {
          const el = document.querySelectorAll('article.turn')[1];
          return el && el.textContent.includes('Paragraph 2 of 400');
        });
        await page.evaluate(() => window.__docstream.abortStream());
        await page.waitForFunction(() => {
          const el = document.querySelectorAll('article.turn')[1];
          return el && el.textContent.includes('Paragraph 4 of 400');
        });
        await page.click('#cancel');
        assert.equal(await waitDone(page, 2), 'error');

        // a reload reads the conversation
        await page.reload();
        await page.locator('article.turn').nth(1).waitFor();

        const about = [
          ...gw.seen('POST', /^\/v1\/chat$/).slice(1),
          ...gw.seen('GET', /^\/v1\/chat\/[^/]+\/stream$/),
          ...gw.seen('POST', /^\/v1\/chat\/[^/]+\/cancel$/),
          ...gw.seen('GET', /^\/v1\/conversations\//),
        ];
        const kinds = new Set(about.map((r) => `${r.method} ${r.path.replace(/resp_[^/]+|conv_[^/]+|[0-9a-f-]{36}/g, '{id}')}`));
        assert.ok(kinds.size >= 4, `requests about the conversation: ${[...kinds].join(', ')}`);
        for (const r of about) assert.equal(r.headers['x-docstream-conversation-id'], conv, `${r.method} ${r.path}`);
      },
      { url: gw.url },
    );
  } finally {
    await gw.stop();
  }
});
