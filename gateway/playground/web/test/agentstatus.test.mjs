// Unit tests of the notice a turn shows while the agent reconnects.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { nextNotice, statusNotice } from '../src/agentstatus.js';

test('statusNotice says the state and the attempt', () => {
  assert.equal(statusNotice({ state: 'reconnecting', attempt: 2 }), 'Reconnecting (attempt 2)…');
  assert.equal(statusNotice({ state: 'retrying', attempt: 2 }), 'Retrying (attempt 2)…');
  assert.equal(statusNotice({ state: 'reconnecting' }), 'Reconnecting…');
  assert.equal(statusNotice({ state: 'reconnecting', attempt: '2<b>' }), 'Reconnecting…');
  assert.equal(statusNotice({ state: 'reconnected', attempt: 2 }), null);
  assert.equal(statusNotice({ state: 'something new', attempt: 1 }), null);
  assert.equal(statusNotice(null), null);
});

test('the notice shows while the agent reconnects and goes when it is back', () => {
  const stream = [
    ['response_start', { id: 'chat_1' }, null],
    ['status', { state: 'reconnecting', attempt: 1 }, 'Reconnecting (attempt 1)…'],
    ['agent_event', { type: 'retry' }, 'Reconnecting (attempt 1)…'],
    ['status', { state: 'retrying', attempt: 1 }, 'Retrying (attempt 1)…'],
    ['status', { state: 'reconnected', attempt: 1 }, null],
    ['status', { state: 'reconnecting', attempt: 2 }, 'Reconnecting (attempt 2)…'],
    ['content_delta', { documentId: 'doc_001', delta: 'Back.' }, null],
    ['status', { state: 'reconnecting', attempt: 3 }, 'Reconnecting (attempt 3)…'],
    ['done', { status: 'error' }, null],
  ];
  let notice = null;
  for (const [name, data, want] of stream) {
    notice = nextNotice(notice, name, data);
    assert.equal(notice, want, `after ${name} ${JSON.stringify(data)}`);
  }
});

test('any event of the agent working clears the notice', () => {
  for (const name of ['document_start', 'content_delta', 'tool_call_start', 'tool_call_arguments', 'tool_result', 'document_end', 'thinking_delta', 'done']) {
    assert.equal(nextNotice('Reconnecting (attempt 1)…', name, {}), null, name);
  }
});
