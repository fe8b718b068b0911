// Browser test of the playground against a gateway whose agent runs in ACP
// mode (agent.protocol: acp): the agent's permission requests and questions
// wait for the page, which answers them with buttons.
//
//   DOCSTREAM_BIN=/path/to/docstream node --test interactive.test.mjs
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
const demo = new DemoServer();
let context = null;
let userDataDir = '';

before(async () => {
  await mkdir(artifacts, { recursive: true });
  if (process.env.DOCSTREAM_URL) return;
  await demo.start({ DOCSTREAM_AGENT_PROTOCOL: 'acp', DOCSTREAM_SIM_SPEED: '0' });
  userDataDir = await mkdtemp(path.join(os.tmpdir(), 'docstream-chromium-'));
  context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking'],
    viewport: { width: 1280, height: 900 },
  });
});

after(async () => {
  try {
    if (context) await context.close();
  } finally {
    await demo.stop();
    if (userDataDir) await rm(userDataDir, { recursive: true, force: true });
  }
});

/** Runs fn with a fresh playground page; a failure keeps a screenshot and the server log. */
async function withPage(name, fn) {
  const page = await context.newPage();
  const errors = [];
  page.on('pageerror', (err) => errors.push(String(err)));
  try {
    await page.goto(`${demo.url}/`);
    await page.locator('#model option[value="auto"], #model option:nth-child(2)').first().waitFor({ state: 'attached', timeout: 10_000 });
    await page.waitForFunction(() => document.querySelector('#ready').dataset.ready !== 'unknown');
    await fn(page);
    assert.deepEqual(errors, [], 'the page logged errors');
  } catch (err) {
    await page.screenshot({ path: path.join(artifacts, `${name}-failure.png`), fullPage: true }).catch(() => {});
    console.error(`--- docstream log (tail) ---\n${demo.log.slice(-40).join('')}`);
    throw err;
  } finally {
    await page.close();
  }
}

async function sendPrompt(page, prompt) {
  await page.fill('#prompt', prompt);
  await page.press('#prompt', 'Control+Enter');
}

/** Waits until the first turn has finished and returns its status. */
async function waitDone(page) {
  const status = page.locator('#transcript > article.turn:nth-of-type(1) > section.response > footer.turn-status');
  await page.waitForFunction(() => {
    const s = document.querySelector('#transcript > article.turn > section.response > footer.turn-status');
    return s && !['connecting', 'streaming'].includes(s.dataset.status);
  });
  return status.getAttribute('data-status');
}

test('permissions: the page approves one command and rejects the next while the run waits', { timeout: 60_000 }, async () => {
  await withPage('permissions', async (page) => {
    const posted = page.waitForRequest((r) => r.method() === 'POST' && new URL(r.url()).pathname === '/v1/chat');
    await sendPrompt(page, 'permissions');
    assert.equal(JSON.parse((await posted).postData()).interactive, true);
    const commands = page.locator('[data-doc-type="terminal_command"]');
    await commands.nth(0).locator('button[data-action="approve"][data-option-id="allow-once"]').click();
    await commands.nth(1).locator('button[data-action="approve"][data-option-id="reject-once"]').click();
    assert.equal(await waitDone(page), 'completed');
    assert.equal(await commands.nth(0).locator('.approval-outcome').getAttribute('data-approval'), 'approved');
    assert.match(await commands.nth(0).textContent(), /12 passing/);
    assert.equal(await commands.nth(1).locator('.approval-outcome').getAttribute('data-approval'), 'rejected');
    assert.equal(await page.locator('button[data-action="approve"]').count(), 0, 'buttons are left after the answers');
  });
});

test('questions: the page answers the waiting clarification and the agent goes on with it', { timeout: 60_000 }, async () => {
  await withPage('questions', async (page) => {
    await sendPrompt(page, 'ask');
    const clar = page.locator('[data-doc-type="clarification"]');
    await clar.locator('[data-role="answer-hint"]', { hasText: 'The agent waits for your answers' }).waitFor();
    await clar.locator('button[data-action="answer"][data-option-id="jwt"]').click();
    await clar.locator('button[data-action="answer"][data-option-id="postgres"]').click();
    const answered = page.waitForRequest((r) => r.method() === 'POST' && r.url().endsWith('/respond'));
    // the composer, fixed at the bottom while the run streams, covers the form's last line: the keyboard sends it
    // the button is enabled by the render after the second choice
    const send = clar.locator('button[data-action="send-answers"]:not([disabled])');
    await send.waitFor();
    await send.press('Enter');
    assert.deepEqual(JSON.parse((await answered).postData()), { questionId: 'q1', optionIds: ['jwt'] });
    assert.equal(await waitDone(page), 'completed');
    assert.equal(await page.locator('article.turn').count(), 1, 'the answers took a new turn');
    const text = (await page.locator('[data-doc-type="text"]').allTextContents()).join('\n');
    assert.match(text, /You chose JSON Web Tokens \(stateless\) and PostgreSQL/);
    assert.match(await clar.locator('.answered').textContent(), /Answered/);
  });
});
