// One turn of the conversation: the user's prompt (or answers) and the
// response folded live from the document stream.
import { nextNotice } from './agentstatus.js';
import { answerTurn, choose, clarificationQuestions, emptyDraft, readyToSend } from './answers.js';
import { browserPacer } from './pacer.js';
import { postJSON } from './stream.js';
import { createDocElement, formatDuration, isControl, planTodos, renderDocument, updateTodos } from './render.js';

const TEXT_TYPES = new Set(['text', 'code_block', 'code_reference', 'error']);

// ---- render scheduling --------------------------------------------------
// Deltas only mark a document pending; the pacer renders it at a later frame,
// less often the longer its renders take, and as soon as it can when it ended.
// A frame renders for about 8 ms (up to 50 ms while a backlog lasts on a page
// slow to lay out) and leaves the rest to the next frames, so that a burst of
// documents (a reload replays the whole log) does not freeze the page.

const afterRender = new Set();
const pacer = browserPacer({
  backoff: 5,
  budgetMs: 8,
  maxBudgetMs: 50,
  // one layout per frame, not one per document: its cost is shared among the
  // documents just rendered, so that a long document, whose layout costs more
  // than its render, is paced by both
  settle: () => void document.documentElement.offsetHeight,
  onRun: () => {
    for (const fn of afterRender) fn();
  },
});

function schedule(doc, ctx) {
  pacer.mark(doc, () => renderDocument(doc, ctx), { urgent: doc.ended });
}

/** Registers a callback run after each batch of renders (used for auto-scroll). */
export function onRendered(fn) {
  afterRender.add(fn);
}

// ---- plans across turns -------------------------------------------------

/** Every plan on the page, so that a todo_update can tick the matching todos. */
export class PlanRegistry {
  constructor() {
    this.plans = [];
  }

  add(doc, ctx) {
    if (!this.plans.some((p) => p.doc === doc)) this.plans.push({ doc, ctx });
  }

  /** The latest plan that has a todo with this id. */
  find(todoId) {
    for (let i = this.plans.length - 1; i >= 0; i--) {
      const { doc, ctx } = this.plans[i];
      if (planTodos(doc).some((t) => t.id === todoId)) return { doc, ctx };
    }
    return null;
  }

  todoText(todoId) {
    const found = this.find(todoId);
    if (!found) return '';
    const todo = planTodos(found.doc).find((t) => t.id === todoId);
    return todo ? todo.content : '';
  }
}

// ---- helpers ------------------------------------------------------------

function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v == null || v === false) continue;
    if (k === 'class') el.className = v;
    else if (k === 'text') el.textContent = v;
    else if (k.startsWith('data-') || k.startsWith('aria-') || k === 'role' || k === 'id' || k === 'title' || k === 'hidden') el.setAttribute(k, v === true ? '' : v);
    else el[k] = v;
  }
  for (const c of children) if (c != null) el.append(c);
  return el;
}

const fmt = new Intl.NumberFormat('en');

let turnCounter = 0;

// ---- the turn -----------------------------------------------------------

export class Turn {
  /**
   * @param {object} opts
   * @param {HTMLElement} opts.container
   * @param {{kind: 'prompt'|'answer', text: string, mode?: string, model?: string, workspace?: string}} opts.request
   * @param {PlanRegistry} opts.plans
   * @param {(answer: {conversationId: string, answers: {questionId: string, optionId: string}[], prompt?: string, summary: string, onRefused: (message: string) => void}) => boolean} opts.onAnswer
   *   sends a clarification's answers as a new turn; false when it cannot now (a turn is running)
   */
  constructor({ container, request, plans, onAnswer }) {
    this.number = ++turnCounter;
    this.plans = plans;
    this.onAnswer = onAnswer;
    this.docs = new Map();
    this.responseId = null;
    this.conversationId = null;
    this.startedAt = performance.now();
    this.firstDocAt = null;
    this.finished = false;
    this.thinking = null;
    this.thoughts = []; // every thinking block, for whenRendered
    this.maxSequence = -Infinity; // the largest sequence of a document element
    this.status = 'connecting'; // the turn's status now; the status line shows it once the documents are rendered
    this.ctx = { todoText: (id) => plans.todoText(id) };

    const titleId = `turn-${this.number}-title`;
    const meta = [request.mode, request.model, request.workspace].filter(Boolean).join(' · ');
    this.userEl = h(
      'div',
      { class: `user-msg ${request.kind === 'answer' ? 'is-answer' : ''}` },
      h('h2', { class: 'visually-hidden', id: titleId, text: `Turn ${this.number}` }),
      h('div', { class: 'who', 'aria-hidden': 'true', text: request.kind === 'answer' ? 'Your answer' : 'You' }),
      h('div', { class: 'bubble', text: request.text }),
      meta ? h('div', { class: 'user-meta', text: meta }) : null,
    );
    this.metaEl = h('span', { class: 'response-id' });
    this.connEl = h('span', { class: 'conn', role: 'status', hidden: true });
    this.docsEl = h('div', { class: 'docs' });
    this.agentNotice = null; // "Reconnecting (attempt 2)…" while the agent reconnects
    this.agentEl = h('div', { class: 'agent-status', role: 'status', 'aria-live': 'polite', hidden: true });
    this.statusEl = h('footer', { class: 'turn-status', 'data-status': 'connecting', role: 'status' });
    this.setStatusLine('connecting', 'Connecting…');
    this.responseEl = h(
      'section',
      { class: 'response', 'aria-busy': 'true', 'aria-label': 'Response' },
      h('div', { class: 'response-meta' }, h('span', { class: 'who', text: 'Docstream' }), this.metaEl, this.connEl),
      this.docsEl,
      this.agentEl,
      this.statusEl,
    );
    this.el = h('article', { class: 'turn', 'aria-labelledby': titleId, 'data-turn': String(this.number) }, this.userEl, this.responseEl);
    this.el.addEventListener('click', (e) => this.onClick(e));
    this.el.addEventListener('input', (e) => this.onInput(e));
    this.el.addEventListener('keydown', (e) => this.onKeyDown(e));
    container.append(this.el);
  }

  // ---- events -----------------------------------------------------------

  /** Applies one stream event. */
  handle(name, data) {
    if (this.finished && name !== 'done') return;
    this.setAgentNotice(nextNotice(this.agentNotice, name, data));
    switch (name) {
      case 'response_start':
        return this.onResponseStart(data || {});
      case 'document_start':
        return this.onDocumentStart(data || {});
      case 'content_delta':
        return this.withDoc(data, (doc) => {
          doc.content = (doc.content || '') + (data.delta ?? '');
        });
      case 'tool_call_start':
        return this.withDoc(data, (doc) => {
          doc.toolName = data.toolName;
          doc.toolCallId = data.toolCallId;
        });
      case 'tool_call_arguments':
        return this.withDoc(data, (doc) => {
          doc.arguments = data.arguments;
          this.afterChange(doc);
        });
      case 'tool_result':
        return this.withDoc(data, (doc) => {
          doc.result = data.result;
        });
      case 'document_end':
        return this.withDoc(data, (doc) => {
          if ('finalContent' in data) doc.content = data.finalContent;
          else if ('content' in data) doc.content = data.content;
          if (data.metadata && typeof data.metadata === 'object') doc.metadata = { ...doc.metadata, ...data.metadata };
          doc.ended = true;
          this.afterChange(doc);
        });
      case 'document_update': // a document that waits for an answer, or its answer
        return this.withDoc(data, (doc) => {
          if (data.metadata && typeof data.metadata === 'object') doc.metadata = { ...data.metadata };
          doc.responding = false;
          this.afterChange(doc);
        });
      case 'thinking_delta':
        return this.onThinking(data && data.delta);
      case 'done':
        return this.onDone(data || {});
      default:
        return undefined; // agent_event and future events: not rendered
    }
  }

  onResponseStart(data) {
    this.responseId = data.id || this.responseId;
    if (data.conversationId) this.conversationId = data.conversationId;
    const parts = [data.id, data.model, data.mode].filter(Boolean);
    this.metaEl.textContent = parts.join(' · ');
    if (data.id) this.el.dataset.responseId = data.id;
    if (!this.finished) this.setStatusLine('streaming', 'Streaming…');
  }

  onDocumentStart(data) {
    if (!data.id || this.docs.has(data.id)) return;
    const type = data.type || 'text';
    const doc = {
      id: data.id,
      type,
      sequence: data.sequence ?? this.docs.size + 1,
      content: TEXT_TYPES.has(type) ? '' : null,
      metadata: data.metadata && typeof data.metadata === 'object' ? { ...data.metadata } : {},
      ended: false,
      result: null,
    };
    doc.el = createDocElement(doc);
    this.docs.set(doc.id, doc);
    this.insert(doc.el, doc.sequence);
    this.thinking = null;
    if (this.firstDocAt == null) this.firstDocAt = performance.now();
    if (this.status === 'connecting') this.setStatusLine('streaming', 'Streaming…');
    this.afterChange(doc);
    schedule(doc, this.ctx);
  }

  /** Inserts a document element in sequence order (appends when its sequence is the largest yet, as in a stream). */
  insert(el, sequence) {
    el.dataset.sequence = String(sequence);
    const seq = Number(sequence);
    if (!Number.isFinite(seq) || seq >= this.maxSequence) {
      if (Number.isFinite(seq)) this.maxSequence = seq;
      this.docsEl.append(el);
      return;
    }
    for (const child of this.docsEl.children) {
      const s = Number(child.dataset.sequence);
      if (Number.isFinite(s) && s > sequence) {
        this.docsEl.insertBefore(el, child);
        return;
      }
    }
    this.docsEl.append(el);
  }

  withDoc(data, fn) {
    const doc = data && this.docs.get(data.documentId);
    if (!doc) return;
    fn(doc);
    schedule(doc, this.ctx);
  }

  /** Keeps plans registered and lets todo updates tick their todos. */
  afterChange(doc) {
    if (doc.type === 'plan') {
      this.plans.add(doc, this.ctx);
    } else if (doc.type === 'todo_update') {
      for (const t of updateTodos(doc)) {
        const found = this.plans.find(t.id);
        if (!found) continue;
        found.doc.todoOverrides = { ...(found.doc.todoOverrides || {}), [t.id]: t.status };
        schedule(found.doc, found.ctx);
      }
    }
  }

  onThinking(delta) {
    if (!delta) return;
    if (!this.thinking) {
      const body = h('div', { class: 'thinking-body' });
      const el = h('details', { class: 'thinking' }, h('summary', { text: 'Thinking' }), body);
      this.docsEl.append(el);
      this.thinking = { el, body, pending: '' };
      this.thoughts.push(this.thinking);
    }
    const thinking = this.thinking;
    thinking.pending += delta;
    pacer.mark(thinking, () => {
      thinking.body.append(thinking.pending);
      thinking.pending = '';
    });
  }

  onDone(data) {
    if (this.finished) return;
    this.finished = true;
    this.setAgentNotice(null);
    this.status = data.status || 'completed';
    if (data.conversationId) this.conversationId = data.conversationId;
    for (const doc of this.docs.values()) {
      if (!doc.ended) {
        doc.ended = true;
        doc.interrupted = true;
        schedule(doc, this.ctx);
      }
    }
    this.showConnection(null);
    this.whenRendered(() => {
      this.responseEl.setAttribute('aria-busy', 'false');
      this.renderDone(data);
    });
  }

  /**
   * Runs fn at a frame after every pending render of the turn has run: the
   * status line says the turn ended only once its documents show it all.
   */
  whenRendered(fn) {
    const job = () => {
      if (this.rendering()) pacer.mark(this, job, { urgent: true });
      else fn();
    };
    pacer.mark(this, job, { urgent: true });
  }

  rendering() {
    for (const doc of this.docs.values()) if (pacer.has(doc)) return true;
    return this.thoughts.some((t) => pacer.has(t));
  }

  renderDone(data) {
    const status = data.status || 'completed';
    const usage = data.usage || {};
    const meta = data.metadata || {};
    const items = [];
    const stat = (label, value) => items.push(h('div', {}, h('dt', { text: label }), h('dd', { text: value })));
    if (usage.reported === false) {
      stat('Tokens', 'not reported');
    } else if (usage.totalTokens != null || usage.promptTokens != null) {
      stat('Tokens', `prompt ${fmt.format(usage.promptTokens ?? 0)} · completion ${fmt.format(usage.completionTokens ?? 0)} · total ${fmt.format(usage.totalTokens ?? 0)}`);
    }
    if (typeof meta.duration_ms === 'number') stat('Duration', formatDuration(meta.duration_ms));
    if (this.firstDocAt != null && !this.restored) stat('First document', formatDuration(this.firstDocAt - this.startedAt));
    if (typeof meta.toolCallCount === 'number') stat('Tool calls', String(meta.toolCallCount));
    if (typeof meta.turnCount === 'number') stat('Steps', String(meta.turnCount));
    if (this.reconnects) stat('Re-attached', `${this.reconnects}×`);
    const label = status === 'completed' ? 'Completed' : status === 'error' ? 'Error' : status;
    const parts = [h('span', { class: `status-badge s-${status}` }, h('span', { class: 'status-dot', 'aria-hidden': 'true' }), document.createTextNode(label))];
    if (meta.stopReason) parts.push(h('span', { class: 'badge stop-reason', title: 'stop reason', text: meta.stopReason }));
    if (items.length) parts.push(h('dl', { class: 'stats' }, ...items));
    this.statusEl.replaceChildren(...parts);
    this.statusEl.dataset.status = status;
    this.el.dataset.status = status;
  }

  // ---- connection state -------------------------------------------------

  setStatusLine(status, text) {
    this.status = status;
    this.statusEl.dataset.status = status;
    if (this.el) this.el.dataset.status = status;
    this.statusEl.replaceChildren(h('span', { class: `status-badge s-${status}` }, h('span', { class: 'status-dot', 'aria-hidden': 'true' }), document.createTextNode(text)));
  }

  /** Shows the agent's reconnect notice, or hides it for null. */
  setAgentNotice(text) {
    if (text === this.agentNotice) return;
    this.agentNotice = text;
    this.agentEl.hidden = !text;
    this.agentEl.textContent = text || '';
  }

  /** Shows or hides the connection indicator ("reconnecting…"). */
  showConnection(text, { fadeAfterMs = 0 } = {}) {
    clearTimeout(this.connTimer);
    this.connEl.hidden = !text;
    this.connEl.textContent = text || '';
    this.el.classList.toggle('is-reconnecting', Boolean(text) && !fadeAfterMs);
    if (text && fadeAfterMs) this.connTimer = setTimeout(() => this.showConnection(null), fadeAfterMs);
  }

  /** The request failed before a stream started, or the stream was lost for good. */
  fail(status, title, message) {
    if (this.finished) return;
    this.finished = true;
    this.status = status;
    this.setAgentNotice(null);
    this.showConnection(null);
    this.whenRendered(() => {
      this.responseEl.setAttribute('aria-busy', 'false');
      const box = h('div', { class: 'request-error', role: 'alert' }, h('strong', { text: title }), message ? h('p', { text: message }) : null);
      this.docsEl.append(box);
      this.setStatusLine(status, status === 'disconnected' ? 'Disconnected' : 'Error');
    });
  }

  /** Folds a whole ChatResponse (GET /v1/chat/{id}) into the turn. */
  applyResponse(resp, { restored = false } = {}) {
    if (!resp || typeof resp !== 'object') return;
    if (restored) this.restored = true;
    if (resp.id) this.onResponseStart({ id: resp.id, conversationId: resp.conversationId, model: resp.model, mode: resp.mode });
    for (const d of Array.isArray(resp.documents) ? resp.documents : []) {
      if (!this.docs.has(d.id)) this.onDocumentStart({ id: d.id, type: d.type, sequence: d.sequence, metadata: d.metadata });
      const doc = this.docs.get(d.id);
      if (!doc) continue;
      doc.content = d.content ?? doc.content;
      doc.metadata = { ...doc.metadata, ...(d.metadata || {}) };
      doc.ended = true;
      this.afterChange(doc);
      schedule(doc, this.ctx);
    }
    if (resp.status && resp.status !== 'streaming') {
      this.onDone({ id: resp.id, conversationId: resp.conversationId, status: resp.status, usage: resp.usage, metadata: resp.metadata });
    }
  }

  // ---- interaction ------------------------------------------------------

  onClick(e) {
    const target = e.target instanceof Element ? e.target.closest('[data-action]') : null;
    if (!target || !isControl(target) || !this.el.contains(target)) return;
    const docEl = target.closest('[data-doc-id]');
    const doc = docEl ? this.docs.get(docEl.dataset.docId) : null;
    const action = target.dataset.action;
    if (action === 'copy' && doc) {
      copyText(doc.content || '', target);
    } else if (action === 'answer' && doc) {
      this.chooseOption(doc, target.dataset.questionId, target.dataset.optionId);
    } else if (action === 'send-answers' && doc) {
      this.sendAnswers(doc);
    } else if (action === 'approve' && doc) {
      this.respond(doc, [{ toolCallId: doc.metadata.toolCallId, optionId: target.dataset.optionId }]);
    }
  }

  /** Keeps a clarification's note as it is typed (without a render, which would move the caret). */
  onInput(e) {
    const target = e.target;
    if (!(target instanceof HTMLTextAreaElement) || target.dataset.action !== 'note' || !isControl(target)) return;
    const docEl = target.closest('[data-doc-id]');
    const doc = docEl ? this.docs.get(docEl.dataset.docId) : null;
    if (!doc || doc.sent) return;
    doc.draft = { ...(doc.draft || emptyDraft()), note: target.value };
    const send = docEl.querySelector('[data-action="send-answers"]');
    if (send && isControl(send)) send.disabled = !readyToSend(clarificationQuestions(doc), doc.draft);
  }

  /** Ctrl+Enter (⌘+Enter) in a clarification's note sends its answers, as in the composer. */
  onKeyDown(e) {
    const target = e.target;
    if (e.key !== 'Enter' || !(e.ctrlKey || e.metaKey) || !(target instanceof HTMLTextAreaElement) || target.dataset.action !== 'note' || !isControl(target)) return;
    const docEl = target.closest('[data-doc-id]');
    const doc = docEl ? this.docs.get(docEl.dataset.docId) : null;
    if (!doc) return;
    e.preventDefault();
    this.sendAnswers(doc);
  }

  /** Picks an option in a clarification's form; nothing is sent yet. */
  chooseOption(doc, questionId, optionId) {
    if (doc.sent || !questionId || !optionId) return;
    const q = clarificationQuestions(doc).find((x) => x.id === questionId);
    doc.draft = choose(doc.draft || emptyDraft(), q, optionId);
    doc.answerProblem = '';
    schedule(doc, this.ctx);
  }

  /**
   * Answers what the running agent waits for (POST /v1/chat/{id}/respond),
   * one body after another; the stream then shows the document's new state.
   */
  async respond(doc, bodies) {
    if (doc.responding || !this.responseId) return;
    doc.responding = true;
    doc.answerProblem = '';
    schedule(doc, this.ctx);
    try {
      for (const body of bodies) {
        await postJSON(`/v1/chat/${encodeURIComponent(this.responseId)}/respond`, body, { conversationId: this.conversationId });
      }
      doc.sent = doc.type === 'clarification';
    } catch (err) {
      doc.responding = false;
      doc.answerProblem = `The gateway refused the answer: ${err && err.message ? err.message : err}`;
    }
    schedule(doc, this.ctx);
  }

  /**
   * Sends every answer of a clarification's form (and its note): to the
   * agent that waits for them, or else as one new turn.
   */
  sendAnswers(doc) {
    if (doc.sent) return;
    if (doc.metadata && doc.metadata.awaiting && !this.finished) {
      const draft = doc.draft || emptyDraft();
      const note = draft.note.trim();
      const bodies = clarificationQuestions(doc)
        .filter((q) => (draft.choices[q.id] || []).length || note)
        .map((q) => ({ questionId: q.id, optionIds: draft.choices[q.id] || [], ...(note ? { text: note } : {}) }));
      this.respond(doc, bodies);
      return;
    }
    const conversationId = this.conversationId;
    const turn = answerTurn(clarificationQuestions(doc), doc.draft || emptyDraft());
    if (!conversationId || !turn) return;
    const onRefused = (message) => {
      doc.sent = false;
      doc.answerProblem = `The gateway refused the answers: ${message}`;
      schedule(doc, this.ctx);
    };
    if (this.onAnswer({ conversationId, ...turn, onRefused }) === false) {
      doc.answerProblem = 'A turn is still running: send the answers once it has ended.';
    } else {
      doc.sent = true;
      doc.answerProblem = '';
    }
    schedule(doc, this.ctx);
  }
}

async function copyText(text, button) {
  let ok = false;
  try {
    await navigator.clipboard.writeText(text);
    ok = true;
  } catch {
    ok = false;
  }
  const label = button.textContent;
  button.textContent = ok ? 'Copied' : 'Copy failed';
  setTimeout(() => {
    button.textContent = label;
  }, 1200);
}
