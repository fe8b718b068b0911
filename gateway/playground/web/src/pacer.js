// Paces the re-rendering of growing documents. A change only marks its job
// pending; pending jobs run at the next animation frame, at most once per
// frame, and a job whose last run took T ms waits `backoff` times T after that
// run before it runs again, so that a document too big to re-render per frame
// leaves the main thread mostly free. An urgent job (a document that ended)
// runs at the next frame whatever its cost.

export class Pacer {
  /**
   * @param {object} opts
   * @param {() => number} opts.now            milliseconds, monotonic
   * @param {(fn: () => void) => () => void} opts.frame   runs fn at the next frame; returns a cancel
   * @param {(ms: number, fn: () => void) => () => void} opts.after  runs fn after ms; returns a cancel
   * @param {number} [opts.backoff]          the wait after a run, in multiples of its cost
   * @param {number} [opts.fallbackMs]       runs due jobs this long after a frame was asked for, in case frames stop (hidden tabs)
   * @param {() => void} [opts.onRun]        called after each batch of runs
   */
  constructor({ now, frame, after, backoff = 4, fallbackMs = 250, onRun = () => {} }) {
    this.now = now;
    this.frame = frame;
    this.after = after;
    this.backoff = backoff;
    this.fallbackMs = fallbackMs;
    this.onRun = onRun;
    this.pending = new Map(); // key → {run, urgent}
    this.last = new WeakMap(); // key → {end, cost} of its last run
    this.cancels = [];
    this.wakeAt = Infinity;
  }

  /** Marks the job of key pending; run replaces the pending run of key. */
  mark(key, run, { urgent = false } = {}) {
    const job = this.pending.get(key);
    this.pending.set(key, { run, urgent: urgent || Boolean(job && job.urgent) });
    this.arm();
  }

  /** Runs every pending job now. */
  flush() {
    this.disarm();
    const jobs = [...this.pending];
    this.pending.clear();
    for (const [key, job] of jobs) this.runJob(key, job);
    if (jobs.length) this.onRun();
  }

  /** The time at which the job of key may run. */
  dueAt(key, job) {
    const last = this.last.get(key);
    if (job.urgent || !last) return 0;
    return last.end + this.backoff * last.cost;
  }

  runJob(key, job) {
    const start = this.now();
    try {
      job.run();
    } finally {
      const end = this.now();
      this.last.set(key, { end, cost: end - start });
    }
  }

  tick() {
    this.disarm();
    const now = this.now();
    let ran = false;
    try {
      for (const [key, job] of [...this.pending]) {
        if (this.dueAt(key, job) > now) continue;
        this.pending.delete(key);
        ran = true;
        this.runJob(key, job);
      }
    } finally {
      if (ran) this.onRun();
      this.arm();
    }
  }

  /** Asks for a tick when the earliest pending job is due. */
  arm() {
    if (!this.pending.size) return;
    let due = Infinity;
    for (const [key, job] of this.pending) due = Math.min(due, this.dueAt(key, job));
    if (due >= this.wakeAt) return;
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
