// Unit tests of Pacer: when a growing document is rendered again.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Pacer } from '../src/pacer.js';

/** A pacer on a fake clock; frames and timers fire only when the test says. */
function fakePacer(opts = {}) {
  const env = { t: 0, frames: [], timers: [], flushes: 0 };
  const pacer = new Pacer({
    now: () => env.t,
    frame: (fn) => {
      const f = { fn };
      env.frames.push(f);
      return () => {
        env.frames = env.frames.filter((x) => x !== f);
      };
    },
    after: (ms, fn) => {
      const timer = { at: env.t + ms, fn };
      env.timers.push(timer);
      return () => {
        env.timers = env.timers.filter((x) => x !== timer);
      };
    },
    onRun: () => env.flushes++,
    ...opts,
  });
  /** Fires the pending frame, if any. */
  env.frame = () => {
    const f = env.frames.shift();
    if (f) f.fn();
    return Boolean(f);
  };
  /** Moves the clock to t, firing the timers due on the way. */
  env.advance = (t) => {
    for (;;) {
      const due = env.timers.filter((x) => x.at <= t).sort((a, b) => a.at - b.at)[0];
      if (!due) break;
      env.t = due.at;
      env.timers = env.timers.filter((x) => x !== due);
      due.fn();
    }
    env.t = t;
  };
  return { pacer, env };
}

/** A job that records when it ran and takes cost ms of the fake clock. */
function job(env, cost, runs) {
  return () => {
    runs.push(env.t);
    env.t += cost;
  };
}

test('many changes in one frame render once', () => {
  const { pacer, env } = fakePacer();
  const doc = {};
  const runs = [];
  for (let i = 0; i < 100; i++) pacer.mark(doc, job(env, 1, runs));
  assert.equal(env.frames.length, 1);
  env.frame();
  assert.deepEqual(runs, [0]);
  assert.equal(env.flushes, 1);
  assert.equal(env.frame(), false, 'nothing pending, no frame asked for');
});

test('a document whose render took T waits backoff × T before the next', () => {
  const { pacer, env } = fakePacer({ backoff: 4 });
  const doc = {};
  const runs = [];
  pacer.mark(doc, job(env, 100, runs));
  env.frame(); // renders at 0, ends at 100
  pacer.mark(doc, job(env, 100, runs));
  assert.equal(env.frames.length, 0, 'no frame before the document is due');
  env.advance(499);
  assert.equal(env.frames.length, 0);
  assert.deepEqual(runs, [0]);
  env.advance(500);
  assert.equal(env.frames.length, 1);
  env.frame();
  assert.deepEqual(runs, [0, 500]);
});

test('the main thread stays mostly free while a document grows', () => {
  const { pacer, env } = fakePacer({ backoff: 4 });
  const doc = {};
  let busy = 0;
  let renders = 0;
  let size = 0;
  // 500 deltas 16 ms apart; a render costs 0.05 ms per delta received so far
  for (let i = 1; i <= 500; i++) {
    size++;
    const cost = 0.05 * size;
    pacer.mark(doc, () => {
      renders++;
      busy += cost;
      env.t += cost;
    });
    env.frame();
    env.advance(env.t + 16);
  }
  assert.ok(renders < 250, `${renders} renders of 500 changes`);
  assert.ok(busy / env.t < 0.25, `busy ${Math.round(busy)} of ${Math.round(env.t)} ms`);
});

test('an urgent change (the document ended) renders at the next frame', () => {
  const { pacer, env } = fakePacer({ backoff: 4 });
  const doc = {};
  const runs = [];
  pacer.mark(doc, job(env, 100, runs));
  env.frame();
  pacer.mark(doc, job(env, 100, runs));
  assert.equal(env.frames.length, 0);
  pacer.mark(doc, job(env, 100, runs), { urgent: true });
  assert.equal(env.frames.length, 1);
  env.frame();
  assert.deepEqual(runs, [0, 100]);
});

test('documents are paced apart: a cheap one is not held back by a costly one', () => {
  const { pacer, env } = fakePacer({ backoff: 4 });
  const big = {};
  const small = {};
  const bigRuns = [];
  const smallRuns = [];
  pacer.mark(big, job(env, 200, bigRuns));
  pacer.mark(small, job(env, 1, smallRuns));
  env.frame(); // big 0..200, small 200..201
  pacer.mark(big, job(env, 200, bigRuns));
  pacer.mark(small, job(env, 1, smallRuns));
  env.advance(206);
  env.frame();
  assert.deepEqual(smallRuns, [200, 206]);
  assert.deepEqual(bigRuns, [0]);
  env.advance(1000);
  env.frame();
  assert.deepEqual(bigRuns, [0, 1000]);
});

test('without frames (a hidden tab) a timer renders', () => {
  const { pacer, env } = fakePacer({ fallbackMs: 250 });
  const runs = [];
  pacer.mark({}, job(env, 1, runs));
  env.advance(249);
  assert.deepEqual(runs, []);
  env.advance(250);
  assert.deepEqual(runs, [250]);
});

test('the latest run of a key replaces the pending one', () => {
  const { pacer, env } = fakePacer();
  const doc = {};
  const seen = [];
  pacer.mark(doc, () => seen.push('old'));
  pacer.mark(doc, () => seen.push('new'));
  env.frame();
  assert.deepEqual(seen, ['new']);
});

test('a burst is spread over frames: a frame runs jobs for about its budget, in order', () => {
  const { pacer, env } = fakePacer({ budgetMs: 10 });
  const runs = [];
  for (let i = 0; i < 100; i++) pacer.mark({}, () => {
    runs.push(i);
    env.t += 1;
  });
  env.frame();
  assert.equal(runs.length, 10, 'the first frame ran 10 ms of jobs');
  env.t += 16;
  while (env.frame()) env.t += 16;
  assert.deepEqual(runs, Array.from({ length: 100 }, (_, i) => i));
});

test('while a backlog lasts, a frame runs jobs as long as the browser took since the last, up to maxBudgetMs', () => {
  const { pacer, env } = fakePacer({ budgetMs: 10, maxBudgetMs: 50 });
  let runs = 0;
  for (let i = 0; i < 1000; i++) pacer.mark({}, () => {
    runs++;
    env.t += 1;
  });
  env.frame();
  assert.equal(runs, 10);
  env.t += 30; // layout and paint of a long page
  env.frame();
  assert.equal(runs, 40);
  env.t += 200;
  env.frame();
  assert.equal(runs, 90, 'capped at maxBudgetMs');
});

test('settle runs once per batch and its cost is shared among the batch', () => {
  let settles = 0;
  const { pacer, env } = fakePacer({ backoff: 4, settle: () => {
    settles++;
    env.t += 30;
  } });
  const a = {};
  const b = {};
  const runs = [];
  pacer.mark(a, job(env, 10, runs));
  pacer.mark(b, job(env, 20, runs));
  env.frame(); // a 0..10, b 10..30, settle 30..60: a costs 20, b 40
  assert.equal(settles, 1);
  pacer.mark(a, job(env, 1, runs));
  pacer.mark(b, job(env, 1, runs));
  env.advance(139);
  assert.equal(env.frames.length, 0);
  env.advance(140);
  env.frame();
  assert.deepEqual(runs, [0, 10, 140], 'a runs at 60 + 4 × 20; b waits until 60 + 4 × 40');
});
