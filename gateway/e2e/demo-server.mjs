// The docstream demo gateway for the end-to-end tests: started from
// $DOCSTREAM_BIN on a free loopback port (or $DOCSTREAM_URL, already running).
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import net from 'node:net';

function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

/** A running demo gateway: its URL, its log tail, and stop(). */
export class DemoServer {
  constructor() {
    this.url = process.env.DOCSTREAM_URL || '';
    this.log = [];
    this.proc = null;
  }

  /** Starts `$DOCSTREAM_BIN --demo` with env added, unless DOCSTREAM_URL is set. */
  async start(env = {}) {
    if (this.url) return;
    const bin = process.env.DOCSTREAM_BIN;
    assert.ok(bin, 'DOCSTREAM_BIN must name the docstream binary (or DOCSTREAM_URL a running demo gateway)');
    const addr = `127.0.0.1:${await freePort()}`;
    this.proc = spawn(bin, ['--demo', '--addr', addr], {
      env: { ...process.env, DOCSTREAM_STORE_DRIVER: 'memory', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true, // its own process group, so that the agent processes end with it
    });
    const keep = (chunk) => {
      this.log.push(chunk.toString());
      if (this.log.length > 400) this.log.splice(0, this.log.length - 400);
    };
    this.proc.stdout.on('data', keep);
    this.proc.stderr.on('data', keep);
    this.url = `http://${addr}`;
    await this.waitHealthy(30_000);
  }

  async waitHealthy(timeoutMs) {
    const deadline = Date.now() + timeoutMs;
    let last = '';
    while (Date.now() < deadline) {
      if (this.proc && this.proc.exitCode !== null) {
        throw new Error(`docstream exited with code ${this.proc.exitCode} before it was healthy:\n${this.log.join('')}`);
      }
      try {
        const res = await fetch(`${this.url}/healthz`);
        if (res.ok) return;
        last = `status ${res.status}`;
      } catch (err) {
        last = err.message;
      }
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error(`docstream was not healthy after ${timeoutMs} ms (${last}):\n${this.log.join('')}`);
  }

  /** Ends the gateway's process group: SIGTERM, SIGKILL after 10 s. */
  async stop() {
    const p = this.proc;
    if (!p || p.exitCode !== null) return;
    const exited = new Promise((resolve) => p.once('exit', resolve));
    const signal = (sig) => {
      try {
        process.kill(-p.pid, sig);
      } catch {
        // already gone
      }
    };
    signal('SIGTERM');
    const timer = setTimeout(() => signal('SIGKILL'), 10_000);
    await exited;
    clearTimeout(timer);
  }
}
