// The Docstream playground: a reference client for the document stream.
import './styles.css';
import { Conversation } from './conversation.js';
import { ChatStream, apiKey, getJSON, postJSON, waitForResponse } from './stream.js';
import { PlanRegistry, Turn, onRendered } from './turn.js';

const $ = (id) => document.getElementById(id);

const ui = {
  form: $('composer'),
  prompt: $('prompt'),
  workspace: $('workspace'),
  mode: $('mode'),
  model: $('model'),
  thinking: $('thinking'),
  apiKey: $('api-key'),
  send: $('send'),
  cancel: $('cancel'),
  newConversation: $('new-conversation'),
  conversationId: $('conversation-id'),
  transcript: $('transcript'),
  empty: $('empty'),
  examples: $('examples'),
  simulator: $('simulator-badge'),
  ready: $('ready'),
  runStatus: $('run-status'),
};

const SETTINGS_KEY = 'docstream.settings';
const ACTIVE_KEY = 'docstream.activeRun';

/** The run this tab follows, kept across a reload so that the page can re-attach. */
const activeRun = {
  get() {
    try {
      return JSON.parse(sessionStorage.getItem(ACTIVE_KEY) || 'null');
    } catch {
      return null;
    }
  },
  set(value) {
    try {
      if (value) sessionStorage.setItem(ACTIVE_KEY, JSON.stringify(value));
      else sessionStorage.removeItem(ACTIVE_KEY);
    } catch {
      // storage unavailable
    }
  },
};
const plans = new PlanRegistry();

const state = {
  /** @type {{turn: Turn, stream: ChatStream} | null} */
  active: null,
  cancelling: false,
};

/** The agent runs in ACP mode: its questions and permission requests wait for this page. */
let interactive = false;

// ---- settings -----------------------------------------------------------

function loadSettings() {
  try {
    return JSON.parse(localStorage.getItem(SETTINGS_KEY) || '{}') || {};
  } catch {
    return {};
  }
}

function saveSettings() {
  try {
    localStorage.setItem(
      SETTINGS_KEY,
      JSON.stringify({ mode: ui.mode.value, model: ui.model.value, workspace: ui.workspace.value, thinking: ui.thinking.checked }),
    );
  } catch {
    // storage unavailable
  }
}

const saved = loadSettings();
if (saved.mode) ui.mode.value = saved.mode;
ui.thinking.checked = Boolean(saved.thinking);
ui.apiKey.value = apiKey.get();

// ---- gateway information ------------------------------------------------

function fillSelect(select, items, selected) {
  const keep = select.value;
  select.replaceChildren();
  for (const item of items) {
    const opt = document.createElement('option');
    opt.value = item.value;
    opt.textContent = item.label;
    select.append(opt);
  }
  const wanted = [selected, keep].find((v) => v && items.some((i) => i.value === v));
  if (wanted) select.value = wanted;
}

/**
 * Shows the gateway's readiness. Behind an ingress that routes only the page
 * and /v1 (deploy/k8s), /readyz is not the gateway's: its readiness is then
 * unknown, which is not "not ready".
 */
async function loadReady() {
  const text = ui.ready.querySelector('.ready-text');
  let res = null;
  let body = null;
  try {
    res = await fetch('/readyz', { cache: 'no-store', headers: { Accept: 'application/json' } });
    body = await res.json();
  } catch {
    body = null;
  }
  if (!res || !body || typeof body.status !== 'string') {
    ui.ready.dataset.ready = 'unknown';
    text.textContent = 'unknown';
    ui.ready.title = "the gateway's /readyz is not reachable from this page";
    return;
  }
  const agent = body.agent || {};
  interactive = agent.protocol === 'acp';
  ui.simulator.hidden = agent.simulator !== true;
  ui.examples.hidden = agent.simulator !== true;
  // "degraded": runs are served, but the store does not keep them.
  const state = !res.ok ? 'not-ready' : body.status === 'degraded' ? 'degraded' : 'ready';
  ui.ready.dataset.ready = state;
  text.textContent = state.replace('-', ' ');
  ui.ready.title = state === 'degraded' && typeof body.store === 'string' ? `store: ${body.store}` : agent.binary ? `agent: ${agent.binary}` : '';
}

async function loadWorkspaces() {
  try {
    const body = await getJSON('/v1/workspaces');
    const list = Array.isArray(body.workspaces) ? body.workspaces : [];
    const items = list.map((w) => ({ value: w.name, label: w.default ? `${w.name} (default)` : w.name }));
    const def = list.find((w) => w.default);
    fillSelect(ui.workspace, items.length ? items : [{ value: '', label: 'default' }], saved.workspace || (def && def.name));
  } catch (err) {
    fillSelect(ui.workspace, [{ value: '', label: err.status === 401 ? 'default (API key needed)' : 'default' }]);
  }
}

async function loadModels() {
  try {
    const body = await getJSON('/v1/models');
    const ids = (Array.isArray(body.data) ? body.data : []).map((m) => m.id).filter(Boolean);
    const items = [{ value: '', label: 'default' }, ...ids.map((id) => ({ value: id, label: id }))];
    fillSelect(ui.model, items, saved.model);
  } catch (err) {
    fillSelect(ui.model, [{ value: '', label: err.status === 401 ? 'default (API key needed)' : 'default' }]);
  }
}

// ---- conversation -------------------------------------------------------

const conversation = new Conversation(showConversation);

function showConversation(id) {
  // the address keeps the conversation, so that a reload shows it again
  const hash = id ? `#conversation=${encodeURIComponent(id)}` : '';
  if (location.hash !== hash) history.replaceState(null, '', `${location.pathname}${location.search}${hash}`);
  ui.conversationId.textContent = id || 'new';
  ui.conversationId.title = id ? 'follow-up prompts continue this conversation' : 'the next prompt starts a conversation';
  ui.newConversation.disabled = !id;
}

function setRunStatus(status, text) {
  ui.runStatus.dataset.status = status;
  ui.runStatus.textContent = text;
}

function updateControls() {
  const busy = Boolean(state.active);
  ui.send.disabled = busy;
  ui.cancel.disabled = !busy || state.cancelling;
  ui.form.classList.toggle('is-busy', busy);
  document.body.classList.toggle('is-busy', busy);
}

// ---- auto-scroll --------------------------------------------------------

let stick = true;
window.addEventListener(
  'scroll',
  () => {
    const gap = document.documentElement.scrollHeight - window.scrollY - window.innerHeight;
    stick = gap < 160;
  },
  { passive: true },
);
onRendered(() => {
  if (stick) window.scrollTo({ top: document.documentElement.scrollHeight });
});

// ---- running a turn -----------------------------------------------------

function requestSettings() {
  return {
    mode: ui.mode.value || 'agent',
    model: ui.model.value || undefined,
    workspace: ui.workspace.value || undefined,
    thinking: ui.thinking.checked,
  };
}

function startTurn(request, body, { attachTo = null, turn: existing = null, conversationId = conversation.id } = {}) {
  ui.empty.hidden = true;
  const turn = existing || new Turn({ container: ui.transcript, request, plans, onAnswer: answer });
  const generation = conversation.generation;
  const stream = new ChatStream({
    body,
    conversationId,
    onEvent: (name, data) => {
      turn.handle(name, data);
      if (name === 'response_start' && data) {
        conversation.adopt(generation, data.conversationId);
        if (data.id) activeRun.set({ responseId: data.id, conversationId: data.conversationId || stream.conversationId, request });
      }
      if (name === 'done' && data) conversation.adopt(generation, data.conversationId);
    },
    onState: (s, info) => onStreamState({ turn, stream, request, generation }, s, info),
  });
  state.active = { turn, stream };
  state.cancelling = false;
  updateControls();
  setRunStatus('streaming', 'Streaming…');
  stick = true;
  window.scrollTo({ top: document.documentElement.scrollHeight });
  (attachTo ? stream.attach(attachTo) : stream.run()).finally(() => {
    activeRun.set(null);
    if (state.active && state.active.stream === stream) {
      state.active = null;
      state.cancelling = false;
      updateControls();
    }
  });
}

async function onStreamState(run, s, info) {
  const { turn, stream } = run;
  switch (s) {
    case 'reconnecting':
      turn.showConnection(`reconnecting… (attempt ${info.attempt})`);
      setRunStatus('reconnecting', 'Reconnecting…');
      break;
    case 'attached':
      if (info.initial) turn.showConnection(null);
      else turn.showConnection('reconnected', { fadeAfterMs: 1500 });
      turn.reconnects = stream.reconnects;
      setRunStatus('streaming', 'Streaming…');
      break;
    case 'done':
      turn.reconnects = info.reconnects;
      if (turn.status !== 'completed' && turn.status !== 'error') break;
      setRunStatus(turn.status, turn.status === 'completed' ? 'Completed' : 'Ended with an error');
      break;
    case 'rejected': {
      const hint = info.status === 401 ? ' Set the API key and try again.' : '';
      turn.fail('error', `The gateway refused the request (${info.status} ${info.code})`, `${info.message}${hint}`);
      setRunStatus('error', `Refused (${info.status})`);
      // the prompt never ran: give it back for another try
      if (run.request.kind === 'prompt' && !ui.prompt.value) ui.prompt.value = run.request.text;
      // the answers never ran: their form opens again
      if (run.request.kind === 'answer' && typeof run.request.onRefused === 'function') run.request.onRefused(info.message);
      break;
    }
    case 'complete-response':
      turn.applyResponse(info.response);
      if (info.response) conversation.adopt(run.generation, info.response.conversationId);
      setRunStatus(turn.status, 'Done');
      break;
    case 'gone':
    case 'lost':
      await recover(run, s, info);
      break;
    case 'dropped':
      await catchUp(run);
      break;
    default:
      break;
  }
}

/** Shows a finished response (GET /v1/chat/{id}) in its turn. */
function showResponse(run, resp) {
  run.turn.applyResponse(resp);
  conversation.adopt(run.generation, resp.conversationId);
  setRunStatus(resp.status, resp.status === 'completed' ? 'Completed' : 'Ended with an error');
}

function readResponse(stream) {
  return getJSON(`/v1/chat/${encodeURIComponent(stream.responseId)}`, { conversationId: stream.conversationId });
}

/** The stream is gone: fetch the finished response once, else report the loss. */
async function recover(run, s, info) {
  if (run.stream.responseId) {
    try {
      const resp = await readResponse(run.stream);
      if (resp && resp.status && resp.status !== 'streaming') {
        showResponse(run, resp);
        return;
      }
    } catch {
      // fall through
    }
  }
  const message = s === 'gone' ? 'The run is no longer available to re-attach to.' : info.message;
  run.turn.fail('disconnected', 'The connection to the gateway was lost', message);
  setRunStatus('disconnected', 'Disconnected');
}

/** The gateway dropped events this page had not read: wait for the run to end, then show its response. */
async function catchUp(run) {
  run.turn.showConnection('fell behind the stream: waiting for the run to end…');
  setRunStatus('reconnecting', 'Waiting for the run to end…');
  let resp = null;
  let problem = 'The run was still going after 30 minutes.';
  try {
    resp = await waitForResponse(() => readResponse(run.stream));
  } catch (err) {
    problem = err.message;
  }
  if (resp) {
    showResponse(run, resp);
    return;
  }
  run.turn.fail('disconnected', 'The page fell too far behind the stream', problem);
  setRunStatus('disconnected', 'Disconnected');
}

function send() {
  const prompt = ui.prompt.value.trim();
  if (!prompt || state.active) return;
  const settings = requestSettings();
  const body = { prompt, mode: settings.mode, stream: true, thinking: settings.thinking };
  if (interactive) body.interactive = true;
  if (settings.model) body.model = settings.model;
  if (settings.workspace) body.workspace = settings.workspace;
  if (conversation.id) body.conversationId = conversation.id;
  ui.prompt.value = '';
  startTurn({ kind: 'prompt', text: prompt, mode: settings.mode, model: settings.model, workspace: settings.workspace }, body);
}

/**
 * Answers a clarification: every answer (and the note, as the prompt) in one
 * new turn of the same conversation. onRefused gets the gateway's message
 * when it refuses the turn.
 */
function answer({ conversationId, answers, prompt, summary, onRefused }) {
  if (state.active) return false;
  const settings = requestSettings();
  const body = { conversationId, stream: true, mode: settings.mode, thinking: settings.thinking };
  if (interactive) body.interactive = true;
  if (answers.length) body.answers = answers;
  if (prompt) body.prompt = prompt;
  if (settings.model) body.model = settings.model;
  if (settings.workspace) body.workspace = settings.workspace;
  conversation.set(conversationId);
  startTurn({ kind: 'answer', text: summary, mode: settings.mode, onRefused }, body);
  return true;
}

async function cancel() {
  const active = state.active;
  if (!active || state.cancelling) return;
  const id = active.stream.responseId || active.turn.responseId;
  if (!id) return;
  state.cancelling = true;
  updateControls();
  setRunStatus('cancelling', 'Cancelling…');
  try {
    await postJSON(`/v1/chat/${encodeURIComponent(id)}/cancel`, {}, { conversationId: active.stream.conversationId || active.turn.conversationId });
  } catch (err) {
    state.cancelling = false;
    updateControls();
    setRunStatus('error', `Cancel failed: ${err.message}`);
  }
}

// ---- wiring -------------------------------------------------------------

ui.form.addEventListener('submit', (e) => {
  e.preventDefault();
  send();
});
ui.prompt.addEventListener('keydown', (e) => {
  if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) {
    e.preventDefault();
    send();
  }
});
ui.cancel.addEventListener('click', cancel);
ui.newConversation.addEventListener('click', () => {
  conversation.startNew();
  ui.prompt.focus();
});
for (const el of [ui.mode, ui.model, ui.workspace, ui.thinking]) el.addEventListener('change', saveSettings);
ui.apiKey.addEventListener('change', () => {
  apiKey.set(ui.apiKey.value.trim());
  loadWorkspaces();
  loadModels();
});
ui.examples.addEventListener('click', (e) => {
  const btn = e.target instanceof Element ? e.target.closest('[data-example]') : null;
  if (!btn) return;
  ui.prompt.value = btn.dataset.example;
  ui.prompt.focus();
});
if (navigator.platform && /Mac|iPhone|iPad/.test(navigator.platform)) {
  ui.prompt.placeholder = 'Ask the agent… (⌘+Enter to send)';
  const kbd = document.querySelector('#prompt-hint kbd');
  if (kbd) kbd.textContent = '⌘';
}

/** Shows the conversation named in the address (#conversation=<id>) again. */
async function restoreConversation() {
  const m = /^#conversation=(.+)$/.exec(location.hash);
  const running = activeRun.get();
  if (!m) {
    conversation.set(null);
    if (running && running.responseId) followRun(running);
    return;
  }
  const id = decodeURIComponent(m[1]);
  conversation.set(id);
  let conv;
  try {
    conv = await getJSON(`/v1/conversations/${encodeURIComponent(id)}`, { conversationId: id });
  } catch (err) {
    if (err.status === 404) conversation.set(null);
    if (running && running.responseId) followRun(running);
    return;
  }
  const turns = Array.isArray(conv.turns) ? conv.turns : [];
  const listed = new Set(turns.map((t) => t.responseId || (t.response && t.response.id)));
  for (const t of turns) {
    const resp = t.response || {};
    const request = { kind: 'prompt', text: t.prompt || '(answer)', mode: resp.mode, model: resp.model || conv.model, workspace: conv.workspace };
    if ((t.status || resp.status) === 'streaming' && !state.active) {
      // still running: follow it live from the first event
      const turn = new Turn({ container: ui.transcript, request, plans, onAnswer: answer });
      turn.restored = true;
      startTurn(request, null, { attachTo: t.responseId || resp.id, turn, conversationId: id });
      continue;
    }
    ui.empty.hidden = true;
    const turn = new Turn({ container: ui.transcript, request, plans, onAnswer: answer });
    turn.applyResponse(resp, { restored: true });
  }
  if (running && running.responseId && !listed.has(running.responseId)) followRun(running);
}

/** Re-attaches to the run this tab was following before a reload. */
function followRun(running) {
  if (state.active) return;
  const request = running.request || { kind: 'prompt', text: '' };
  const turn = new Turn({ container: ui.transcript, request, plans, onAnswer: answer });
  turn.restored = true;
  startTurn(request, null, { attachTo: running.responseId, turn, conversationId: running.conversationId || conversation.id });
}

updateControls();
restoreConversation();
loadReady();
loadWorkspaces();
loadModels();

// Hooks for tests and for trying the re-attach by hand.
window.__docstream = {
  /** Aborts the current stream's connection as if the network dropped. */
  abortStream() {
    if (state.active) state.active.stream.abortConnection();
  },
  get responseId() {
    return state.active ? state.active.stream.responseId : null;
  },
  get lastEventId() {
    return state.active ? state.active.stream.lastEventId : 0;
  },
  get conversationId() {
    return conversation.id;
  },
};
