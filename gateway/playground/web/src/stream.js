// The HTTP side of the playground: authenticated JSON calls and the document
// stream of one response, read with fetch() and eventsource-parser, with
// automatic re-attach (Last-Event-ID) when the connection drops before `done`.
import { createParser } from 'eventsource-parser';

const API_KEY_STORAGE = 'docstream.apiKey';

/** An error answer of the gateway: {"error":{"code","message"}} with its HTTP status. */
export class ApiError extends Error {
  constructor(status, code, message) {
    super(message || `HTTP ${status}`);
    this.name = 'ApiError';
    this.status = status;
    this.code = code || `http_${status}`;
  }
}

/** The API key kept in localStorage, sent as `Authorization: Bearer`. */
export const apiKey = {
  get() {
    try {
      return localStorage.getItem(API_KEY_STORAGE) || '';
    } catch {
      return '';
    }
  },
  set(value) {
    try {
      if (value) localStorage.setItem(API_KEY_STORAGE, value);
      else localStorage.removeItem(API_KEY_STORAGE);
    } catch {
      // storage unavailable (private mode): the key lives for this page only
    }
  },
};

/**
 * Request headers with the Authorization header when a key is set, and the
 * conversation header when the request is about a known conversation (a
 * gateway behind an ingress routes on it: deploy/SCALING.md).
 */
export function authHeaders(extra = {}, conversationId = null) {
  const headers = { ...extra };
  const key = apiKey.get().trim();
  if (key) headers.Authorization = `Bearer ${key}`;
  if (conversationId) headers['X-Docstream-Conversation-Id'] = conversationId;
  return headers;
}

/** Reads the gateway's error object from a failed response. */
export async function errorFrom(res) {
  let code = '';
  let message = '';
  try {
    const text = await res.text();
    try {
      const body = JSON.parse(text);
      const err = body && (body.error || body);
      if (err && typeof err === 'object') {
        code = err.code || err.type || '';
        message = err.message || '';
      } else if (typeof err === 'string') {
        message = err;
      }
    } catch {
      message = text.trim().slice(0, 500);
    }
  } catch {
    // body unreadable
  }
  return new ApiError(res.status, code, message || res.statusText || `HTTP ${res.status}`);
}

/** GETs a JSON document. Throws ApiError on a non-2xx answer. */
export async function getJSON(path, { signal, conversationId } = {}) {
  const res = await fetch(path, { headers: authHeaders({ Accept: 'application/json' }, conversationId), signal, cache: 'no-store' });
  if (!res.ok) throw await errorFrom(res);
  return res.json();
}

/** POSTs JSON and returns the parsed answer (or null for an empty one). */
export async function postJSON(path, body, { signal, conversationId } = {}) {
  const res = await fetch(path, {
    method: 'POST',
    headers: authHeaders({ 'Content-Type': 'application/json', Accept: 'application/json' }, conversationId),
    body: JSON.stringify(body ?? {}),
    signal,
  });
  if (!res.ok) throw await errorFrom(res);
  const text = await res.text();
  return text ? JSON.parse(text) : null;
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Reads a response (read() is GET /v1/chat/{id}) until its status is no
 * longer `streaming` and returns it, or null when it still streams after
 * giveUpMs. The wait between reads starts at firstMs and grows by half up to
 * maxMs. A read that fails is tried again, except a 4xx answer, which is thrown.
 */
export async function waitForResponse(read, { firstMs = 1000, maxMs = 10_000, giveUpMs = 30 * 60_000, wait = sleep, now = Date.now } = {}) {
  const deadline = now() + giveUpMs;
  let delay = firstMs;
  for (;;) {
    try {
      const resp = await read();
      if (resp && resp.status && resp.status !== 'streaming') return resp;
    } catch (err) {
      if (err instanceof ApiError && err.status >= 400 && err.status < 500 && err.status !== 408 && err.status !== 429) throw err;
    }
    if (now() + delay > deadline) return null;
    await wait(delay);
    delay = Math.min(delay * 1.5, maxMs);
  }
}

class StreamDropped extends Error {
  constructor(message) {
    super(message);
    this.name = 'StreamDropped';
  }
}

/**
 * One streamed response: POST /v1/chat, then re-attach to
 * GET /v1/chat/{id}/stream until `done` arrives or the run is gone.
 *
 * Callbacks:
 *   onEvent(name, data, id)   every event once, in id order
 *   onState(state, info)      'connecting' | 'streaming' | 'reconnecting' | 'attached'
 *                             | 'done' | 'gone' | 'lost' | 'dropped' | 'rejected';
 *                             the stream ends when the promise onState returns
 *                             for 'gone', 'lost' or 'dropped' settles
 *
 * 'dropped': the gateway dropped events this client had not read yet
 * (events_dropped); the stream cannot go on, the ChatResponse is whole.
 */
export class ChatStream {
  constructor({ body, conversationId = null, onEvent, onState, maxRetries = 6, idleTimeoutMs = 60_000 }) {
    this.body = body;
    this.onEvent = onEvent;
    this.onState = onState;
    this.maxRetries = maxRetries;
    this.idleTimeoutMs = idleTimeoutMs;
    this.responseId = null;
    this.conversationId = conversationId;
    this.lastEventId = 0;
    this.done = false;
    this.dropped = false;
    this.reconnects = 0;
    this.controller = null;
  }

  /** Aborts the current connection as if the network dropped; the stream re-attaches. */
  abortConnection() {
    if (this.controller) this.controller.abort(new StreamDropped('connection aborted'));
  }

  async run() {
    this.onState('connecting', {});
    this.controller = new AbortController();
    let res;
    try {
      res = await fetch('/v1/chat', {
        method: 'POST',
        headers: authHeaders({ 'Content-Type': 'application/json', Accept: 'text/event-stream' }, this.conversationId),
        body: JSON.stringify(this.body),
        signal: this.controller.signal,
        cache: 'no-store',
      });
    } catch (err) {
      await this.onState('lost', { message: `The request failed: ${describe(err)}` });
      return;
    }
    if (!res.ok) {
      const err = await errorFrom(res);
      this.onState('rejected', { status: err.status, code: err.code, message: err.message });
      return;
    }
    this.responseId = res.headers.get('X-Docstream-Response-Id') || null;
    this.conversationId = res.headers.get('X-Docstream-Conversation-Id') || this.conversationId;
    const type = res.headers.get('Content-Type') || '';
    if (!type.includes('text/event-stream')) {
      // A gateway that answered with the whole ChatResponse instead of a stream.
      try {
        const response = await res.json();
        this.done = true;
        this.onState('complete-response', { response });
      } catch (err) {
        await this.onState('lost', { message: `Unexpected answer: ${describe(err)}` });
      }
      return;
    }
    this.onState('streaming', { responseId: this.responseId });
    await this.consume(res);
    await this.reattach();
  }

  /** Follows a run that is already going (after a page reload): replay from the start, then live. */
  async attach(responseId) {
    this.responseId = responseId;
    await this.reattach({ immediate: true });
  }

  async reattach({ immediate = false } = {}) {
    let attempt = 0;
    let first = immediate;
    while (!this.done) {
      if (this.dropped) {
        await this.onState('dropped', { responseId: this.responseId });
        return;
      }
      if (!this.responseId) {
        await this.onState('lost', { message: 'The connection dropped before the response id was known.' });
        return;
      }
      if (attempt >= this.maxRetries) {
        await this.onState('lost', { message: `The connection dropped and ${attempt} attempts to re-attach failed.` });
        return;
      }
      const initial = first; // attaching after a reload is not a reconnect
      first = false;
      if (!initial) {
        this.onState('reconnecting', { attempt: attempt + 1, lastEventId: this.lastEventId });
        await sleep(Math.min(250 * 2 ** attempt, 5_000));
      }
      attempt++;
      this.controller = new AbortController();
      let res;
      try {
        res = await fetch(`/v1/chat/${encodeURIComponent(this.responseId)}/stream`, {
          headers: authHeaders({ Accept: 'text/event-stream', 'Last-Event-ID': String(this.lastEventId) }, this.conversationId),
          signal: this.controller.signal,
          cache: 'no-store',
        });
      } catch {
        continue;
      }
      if (res.status === 204) {
        await this.onState('gone', { responseId: this.responseId });
        return;
      }
      if (!res.ok) {
        const err = await errorFrom(res);
        if (err.code === 'events_dropped') {
          this.dropped = true;
          continue;
        }
        if (res.status >= 400 && res.status < 500 && res.status !== 408 && res.status !== 429) {
          await this.onState('lost', { message: `Re-attach refused: ${err.status} ${err.code}: ${err.message}` });
          return;
        }
        continue;
      }
      if (!initial) this.reconnects++;
      this.onState('attached', { attempt, initial, lastEventId: this.lastEventId });
      const before = this.lastEventId;
      await this.consume(res);
      if (this.lastEventId > before) attempt = 0;
    }
  }

  /** Reads one SSE body until it ends, fails, or goes silent for too long. */
  async consume(res) {
    const controller = this.controller;
    const parser = createParser({
      onEvent: (message) => this.dispatch(message),
      onError: () => {
        // a malformed field: the parser skips it and goes on
      },
    });
    const reader = res.body.getReader();
    const decoder = new TextDecoder();
    let idle = null;
    const arm = () => {
      clearTimeout(idle);
      idle = setTimeout(() => controller.abort(new StreamDropped('no data for too long')), this.idleTimeoutMs);
    };
    arm();
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        arm();
        parser.feed(decoder.decode(value, { stream: true }));
        if (this.done || this.dropped) break;
      }
      parser.feed(decoder.decode());
    } catch {
      // dropped: the caller re-attaches unless `done` was seen
    } finally {
      clearTimeout(idle);
      try {
        reader.releaseLock();
      } catch {
        // already released
      }
      if (this.done || this.dropped) {
        try {
          await res.body.cancel();
        } catch {
          // already closed
        }
      }
    }
  }

  dispatch(message) {
    if (this.done || this.dropped) return;
    let id = null;
    if (message.id !== undefined && message.id !== '') {
      const n = Number(message.id);
      if (Number.isFinite(n)) id = n;
    }
    if (id !== null) {
      if (id <= this.lastEventId) return; // already seen (replay after re-attach)
      this.lastEventId = id;
    }
    let data = null;
    if (message.data) {
      try {
        data = JSON.parse(message.data);
      } catch {
        data = { raw: message.data };
      }
    }
    const name = message.event || 'message';
    if (name === 'response_start' && data) {
      if (data.id) this.responseId = data.id;
      if (data.conversationId) this.conversationId = data.conversationId;
    }
    if (name === 'done') {
      this.done = true;
      if (data && data.conversationId) this.conversationId = data.conversationId;
    }
    if (name === 'error' && data && data.code === 'events_dropped') this.dropped = true;
    this.onEvent(name, data, id);
    if (name === 'done') this.onState('done', { reconnects: this.reconnects });
  }
}

function describe(err) {
  if (!err) return 'unknown error';
  return err.message || String(err);
}
