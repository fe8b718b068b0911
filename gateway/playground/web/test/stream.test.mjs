// Unit tests of waitForResponse: reading a run until it ends.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ApiError, waitForResponse } from '../src/stream.js';

function clock() {
  const c = { t: 0, waits: [] };
  c.now = () => c.t;
  c.wait = async (ms) => {
    c.waits.push(ms);
    c.t += ms;
  };
  return c;
}

test('waitForResponse reads until the run is no longer streaming, waiting longer each time', async () => {
  const c = clock();
  const statuses = ['streaming', 'streaming', 'streaming', 'streaming', 'completed'];
  let reads = 0;
  const resp = await waitForResponse(async () => ({ id: 'r', status: statuses[reads++] }), { firstMs: 1000, maxMs: 2000, wait: c.wait, now: c.now });
  assert.equal(resp.status, 'completed');
  assert.equal(reads, 5);
  assert.deepEqual(c.waits, [1000, 1500, 2000, 2000]);
});

test('waitForResponse gives up after giveUpMs', async () => {
  const c = clock();
  let reads = 0;
  const resp = await waitForResponse(
    async () => {
      reads++;
      return { status: 'streaming' };
    },
    { firstMs: 1000, maxMs: 10_000, giveUpMs: 60_000, wait: c.wait, now: c.now },
  );
  assert.equal(resp, null);
  assert.ok(c.t <= 60_000, `waited ${c.t} ms`);
  assert.ok(reads > 3 && reads < 20, `${reads} reads`);
});

test('waitForResponse tries again after a failed read, not after a 4xx', async () => {
  const c = clock();
  let reads = 0;
  const resp = await waitForResponse(
    async () => {
      reads++;
      if (reads === 1) throw new TypeError('Failed to fetch');
      if (reads === 2) throw new ApiError(503, 'unavailable', 'try later');
      return { status: 'error' };
    },
    { wait: c.wait, now: c.now },
  );
  assert.equal(resp.status, 'error');
  await assert.rejects(
    waitForResponse(
      async () => {
        throw new ApiError(404, 'not_found', 'no such response');
      },
      { wait: c.wait, now: c.now },
    ),
    /no such response/,
  );
});
