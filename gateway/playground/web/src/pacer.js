// Paces the re-rendering of growing documents. A change only marks its job
// pending; pending jobs run at the next animation frame, at most once per
// frame, and a job whose last run took T ms waits `backoff` times T after that
// run before it runs again, so that a document too big to re-render per frame
// leaves the main thread mostly free. An urgent job (a document that ended)
// runs at the next frame that has time for it. A frame runs jobs for about
// `budgetMs` (at least one), in the order they were first marked, and leaves
// the rest to the next frames, so that a burst of many documents (a replayed
// log) never blocks the page for long. While a backlog lasts, a frame may run
// jobs as long as the browser took since the last one (laying out and
// painting a long page), up to `maxBudgetMs`: the jobs get about half of the
// main thread, and a long page is not rendered in many slow frames.

export class Pacer {
  /**
   * @param {object} opts
   * @param {() => number} opts.now            milliseconds, monotonic
   * @param {(fn: () => void) => () => void} opts.frame   runs fn at the next frame; returns a cancel
   * @param {(ms: number, fn: () => void) => () => void} opts.after  runs fn after ms; returns a cancel
   * @param {number} [opts.backoff]          the wait after a run, in multiples of its cost
   * @param {number} [opts.budgetMs]         a frame starts no job after it has run jobs this long
   * @param {number} [opts.maxBudgetMs]      the most a frame's budget grows to while a backlog lasts
   * @param {number} [opts.fallbackMs]       runs due jobs this long after a frame was asked for, in case frames stop (hidden tabs)
   * @param {() => void} [opts.settle]       called once after each batch of runs (e.g. to lay the page out); its cost is
   *                                         shared among the batch's jobs in proportion to their own
   * @param {() => void} [opts.onRun]        called after each batch of runs
   */
  constructor({ now, frame, after, backoff = 4, budgetMs = Infinity, maxBudgetMs = budgetMs, fallbackMs = 250, settle = null, onRun = () => {} }) {
    this.now = now;
    this.frame = frame;
    this.after = after;
    this.backoff = backoff;
    this.budgetMs = budgetMs;
    this.maxBudgetMs = Math.max(budgetMs, maxBudgetMs);
    this.backlogSince = null; // when the last tick ended with due jobs left over
    this.fallbackMs = fallbackMs;
    this.settle = settle;
    this.onRun = onRun;
    this.pending = new Map(); // key → {run, urgent}
    this.last = new WeakMap(); // key → {end, cost} of its last run
    this.cancels = [];
    this.wakeAt = Infinity;
  }

  /** Marks the job of key pending; run replaces the pending run of key. */
  mark(key, run, { urgent = false } = {}) {
    const job = this.pending.get(key);
    const next = { run, urgent: urgent || Boolean(job && job.urgent) };
    this.pending.set(key, next);
    this.armAt(this.dueAt(key, next));
  }

  /** Reports whether the job of key is pending. */
  has(key) {
    return this.pending.has(key);
  }

  /** The time at which the job of key may run. */
  dueAt(key, job) {
    const last = this.last.get(key);
    if (job.urgent || !last) return 0;
    return last.end + this.backoff * last.cost;
  }

  /** Runs one job and records its cost; returns the record. */
  runJob(key, job) {
    const start = this.now();
    const record = { end: start, cost: 0 };
    this.last.set(key, record);
    try {
      job.run();
    } finally {
      record.end = this.now();
      record.cost = record.end - start;
    }
    return record;
  }

  /** Settles a batch of runs (its cost shared among them) and reports it. */
  afterBatch(ran) {
    if (!ran.length) return;
    try {
      if (this.settle) {
        const start = this.now();
        this.settle();
        const end = this.now();
        const extra = end - start;
        const total = ran.reduce((sum, r) => sum + r.cost, 0);
        for (const r of ran) {
          r.cost += total > 0 ? (extra * r.cost) / total : extra / ran.length;
          r.end = end;
        }
      }
    } finally {
      this.onRun();
    }
  }

  tick() {
    this.disarm();
    const start = this.now();
    const budget = this.backlogSince == null ? this.budgetMs : Math.min(this.maxBudgetMs, Math.max(this.budgetMs, start - this.backlogSince));
    const ran = [];
    let leftOver = false;
    try {
      for (const [key, job] of [...this.pending]) {
        if (this.dueAt(key, job) > start) continue;
        if (ran.length && this.now() - start >= budget) {
          leftOver = true;
          break;
        }
        this.pending.delete(key);
        ran.push(this.runJob(key, job));
      }
    } finally {
      try {
        this.afterBatch(ran);
      } finally {
        this.backlogSince = leftOver ? this.now() : null;
        this.arm();
      }
    }
  }

  /** Asks for a tick when the earliest pending job is due. */
  arm() {
    let due = Infinity;
    for (const [key, job] of this.pending) {
      due = Math.min(due, this.dueAt(key, job));
      if (due <= 0) break;
    }
    this.armAt(due);
  }

  /** Asks for a tick at time due, unless one is asked for at or before it. */
  armAt(due) {
    if (due === Infinity || due >= this.wakeAt) return;
    this.disarm();
    this.wakeAt = due;
    const wait = due - this.now();
    if (wait > 0) {
      this.cancels.push(this.after(wait, () => this.tickAtFrame()));
    } else {
      this.tickAtFrame();
    }
  }

  tickAtFrame() {
    this.disarm();
    this.wakeAt = -Infinity; // a tick is coming: nothing needs an earlier one
    this.cancels.push(this.frame(() => this.tick()));
    this.cancels.push(this.after(this.fallbackMs, () => this.tick()));
  }

  disarm() {
    for (const cancel of this.cancels) cancel();
    this.cancels = [];
    this.wakeAt = Infinity;
  }
}

/** A Pacer on the browser's clock, frames and timers. */
export function browserPacer(opts = {}) {
  return new Pacer({
    now: () => performance.now(),
    frame: (fn) => {
      const id = requestAnimationFrame(fn);
      return () => cancelAnimationFrame(id);
    },
    after: (ms, fn) => {
      const id = setTimeout(fn, ms);
      return () => clearTimeout(id);
    },
    ...opts,
  });
}
