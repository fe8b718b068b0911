// Browser test of the playground: starts `docstream --demo` (the built-in agent
// simulator) and drives the page in Debian's Chromium with playwright-core.
//
//   DOCSTREAM_BIN=/path/to/docstream node --test playground.test.mjs
//
// DOCSTREAM_URL=http://127.0.0.1:8080 runs against a demo gateway that is
// already running instead. CHROMIUM overrides /usr/bin/chromium. Screenshots
// go to ./artifacts.
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
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

async function startServer() {
  await demo.start({});
  baseURL = demo.url;
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
  }
});

/** Opens the playground in a new tab and records page errors. */
async function openPlayground() {
  const page = await context.newPage();
  page.errors = [];
  page.on('pageerror', (err) => page.errors.push(String(err)));
  page.on('console', (msg) => {
    if (msg.type() === 'error') page.errors.push(msg.text());
  });
  await page.goto(`${baseURL}/`);
  assert.equal(await page.title(), 'Docstream playground');
  await page.locator('#model option[value="auto"], #model option:nth-child(2)').first().waitFor({ state: 'attached', timeout: 10_000 });
  return page;
}

/** Runs fn with a page; on failure saves a screenshot and the server log. */
async function withPage(name, fn, { keep = false } = {}) {
  const page = await openPlayground();
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

async function sendPrompt(page, prompt) {
  await page.fill('#prompt', prompt);
  await page.press('#prompt', 'Control+Enter');
}

/** Waits until the n-th turn (1-based) has finished and returns its status. */
async function waitDone(page, n, timeout = 90_000) {
  const status = page.locator(`article.turn:nth-of-type(${n}) .turn-status`);
  await page.waitForFunction(
    (i) => {
      const el = document.querySelectorAll('article.turn')[i - 1];
      const s = el && el.querySelector('.turn-status');
      return Boolean(s) && !['connecting', 'streaming'].includes(s.dataset.status);
    },
    n,
    { timeout },
  );
  return status.getAttribute('data-status');
}

const turn = (page, n) => page.locator('article.turn').nth(n - 1);

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
      const statusText = await t.locator('.turn-status').textContent();
      assert.match(statusText, /Completed/);
      assert.match(statusText, /total \d/);
      assert.match(statusText, /First document/);
    },
    { keep: true },
  );
});

test('clarification: an option answers in a new turn', { timeout: 120_000 }, async () => {
  await withPage('clarification', async (page) => {
    await sendPrompt(page, 'ask');
    assert.equal(await waitDone(page, 1), 'completed');
    const conversationId = await page.evaluate(() => window.__docstream.conversationId);
    assert.ok(conversationId, 'no conversation id after the first turn');

    const option = turn(page, 1).locator('[data-doc-type="clarification"] button[data-question-id="q1"][data-option-id="jwt"]');
    const label = (await option.textContent()).trim();
    assert.ok(label.length > 0);

    const posted = page.waitForRequest((req) => req.method() === 'POST' && new URL(req.url()).pathname === '/v1/chat');
    await option.click();
    const body = JSON.parse((await posted).postData());
    assert.deepEqual(body.answers, [{ questionId: 'q1', optionId: 'jwt' }]);
    assert.equal(body.conversationId, conversationId);
    assert.equal(body.stream, true);

    assert.equal(await waitDone(page, 2), 'completed');
    const second = turn(page, 2);
    assert.match(await second.locator('.user-msg .bubble').textContent(), new RegExp(escapeRegExp(label)));
    const answerText = (await second.locator('[data-doc-type="text"]').allTextContents()).join('\n');
    assert.ok(answerText.includes(label), `the follow-up answer does not name "${label}":\n${answerText}`);
    assert.equal(await option.getAttribute('aria-pressed'), 'true');
    assert.ok(await option.isDisabled(), 'the answered option is still enabled');
  });
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
    assert.match(await t.locator('.turn-status').textContent(), /cancelled/i);
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

function escapeRegExp(s) {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
