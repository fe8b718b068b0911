// Renderers for the ten document types. Each takes the document's state
// (accumulated from stream events) and returns the inner HTML of its element.
// Everything from the stream is escaped, highlighted by highlight.js (which
// escapes) or sanitized by DOMPurify.
import { stripAnsi } from './ansi.js';
import { clarificationQuestions, emptyDraft, isChosen, readyToSend, unanswered } from './answers.js';
import { countChanges, diffLines, parseUnifiedDiff } from './diff.js';
import { escapeHTML as esc, highlight } from './highlight.js';
import { renderMarkdown } from './markdown.js';

/**
 * @typedef {object} DocState
 * @property {string} id
 * @property {string} type
 * @property {number} sequence
 * @property {string|null} content
 * @property {Record<string, any>} metadata
 * @property {string} [toolName]
 * @property {string} [toolCallId]
 * @property {any} [arguments]
 * @property {{status: string, data: any}|null} [result]
 * @property {boolean} ended
 * @property {boolean} [interrupted] the response ended without this document's document_end
 * @property {import('./answers.js').Draft} [draft] clarification: the choices and note of its form
 * @property {boolean} [sent] clarification: its answers were sent
 * @property {string} [answerProblem] clarification: why its answers could not be sent
 * @property {Record<string,string>} [todoOverrides] plan: statuses set by later todo_update documents
 */

const STATUS_LABELS = {
  pending: 'pending',
  in_progress: 'in progress',
  completed: 'completed',
  cancelled: 'cancelled',
};

const STATUS_ICONS = {
  pending: '○',
  in_progress: '◐',
  completed: '✓',
  cancelled: '✕',
};

/** Normalizes a todo status (TODO_STATUS_IN_PROGRESS, in-progress, ...) to the spec's set. */
export function normalizeStatus(status) {
  const s = String(status || '')
    .toLowerCase()
    .replace(/^todo_status_/, '')
    .replace(/[\s-]+/g, '_');
  if (s === 'done' || s === 'complete') return 'completed';
  if (s === 'canceled') return 'cancelled';
  if (s === 'inprogress' || s === 'active' || s === 'running') return 'in_progress';
  return STATUS_LABELS[s] ? s : s || 'pending';
}

function formatDuration(ms) {
  if (typeof ms !== 'number' || !Number.isFinite(ms)) return '';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)} s`;
  const m = Math.floor(ms / 60_000);
  const s = Math.round((ms % 60_000) / 1000);
  return `${m} min ${s} s`;
}
export { formatDuration };

function json(value) {
  try {
    return JSON.stringify(value, null, 2) ?? String(value);
  } catch {
    return String(value);
  }
}

// The buttons the playground renders carry this attribute until
// renderDocument registers them as controls; content from a stream cannot
// know its value, so a button it smuggles in is never taken for one.
const CONTROL_MARK = `data-control="${Math.random().toString(36).slice(2)}"`;
const controls = new WeakSet();

/** Reports whether el is a button the playground rendered (not one from a stream). */
export function isControl(el) {
  return controls.has(el);
}

function badge(text, cls = '', title = '') {
  const t = title ? ` title="${esc(title)}"` : '';
  return `<span class="badge ${cls}"${t}>${esc(text)}</span>`;
}

// Code longer than this is highlighted only when its document has ended.
const LIVE_HIGHLIGHT_MAX = 20_000;

/** A code view with an optional line-number gutter; live: the document still streams. */
function codeView(code, language, firstLine = null, live = false) {
  const text = code == null ? '' : String(code).replace(/\n$/, '');
  const langClass = language ? ` language-${esc(language)}` : '';
  const shown = live && text.length > LIVE_HIGHLIGHT_MAX ? esc(text) : highlight(text, language);
  const body = `<pre class="code"><code class="hljs${langClass}">${shown}</code></pre>`;
  if (firstLine == null) return `<div class="code-view">${body}</div>`;
  const count = text === '' ? 1 : text.split('\n').length;
  const numbers = [];
  for (let i = 0; i < count; i++) numbers.push(firstLine + i);
  return `<div class="code-view numbered"><pre class="gutter" aria-hidden="true">${numbers.join('\n')}</pre>${body}</div>`;
}

function streamingMark(doc) {
  return doc.ended ? '' : '<span class="streaming-dot" role="img" aria-label="streaming"></span>';
}

function copyButton() {
  return `<button type="button" class="icon-button copy" data-action="copy" ${CONTROL_MARK} title="Copy to clipboard">Copy</button>`;
}

// ---- text ---------------------------------------------------------------

function renderText(doc) {
  if (doc.metadata.format === 'plain') {
    return `<div class="plain">${esc(doc.content || '')}</div>`;
  }
  return renderMarkdown(doc.content || '');
}

// ---- code_block ---------------------------------------------------------

const PURPOSES = { new_code: 'new code', example: 'example', suggestion: 'suggestion' };

function renderCodeBlock(doc) {
  const m = doc.metadata;
  const lang = m.language || '';
  return `<figcaption class="doc-head">
      <span class="lang" data-language="${esc(lang)}">${esc(lang || 'text')}</span>
      ${m.purpose ? badge(PURPOSES[m.purpose] || m.purpose, 'purpose') : ''}
      ${streamingMark(doc)}
      <span class="spacer"></span>${copyButton()}
    </figcaption>
    ${codeView(doc.content, lang, null, !doc.ended)}`;
}

// ---- code_reference -----------------------------------------------------

export function referenceCaption(m) {
  const path = m.filePath || '';
  if (m.startLine == null) return path;
  return `${path}:${m.startLine}-${m.endLine ?? m.startLine}`;
}

function renderCodeReference(doc) {
  const m = doc.metadata;
  const first = Number.isFinite(m.startLine) ? m.startLine : 1;
  return `<figcaption class="doc-head">
      <span class="ref-icon" aria-hidden="true">↗</span>
      <code class="ref-caption">${esc(referenceCaption(m))}</code>
      ${m.language ? `<span class="lang">${esc(m.language)}</span>` : ''}
      ${streamingMark(doc)}
      <span class="spacer"></span>${copyButton()}
    </figcaption>
    ${codeView(doc.content, m.language || '', first, !doc.ended)}`;
}

// ---- file_edit ----------------------------------------------------------

function argOf(args, ...names) {
  if (!args || typeof args !== 'object') return undefined;
  for (const n of names) if (args[n] != null && args[n] !== '') return args[n];
  return undefined;
}

function diffTable(lines, language) {
  // the file names of a unified diff's header repeat the document's caption
  const shown = lines.filter((l) => !(l.kind === 'meta' && /^(---|\+\+\+|diff |index )/.test(l.text)));
  const rows = shown.map((l) => {
    if (l.kind === 'hunk' || l.kind === 'meta') {
      return `<tr class="d-${l.kind}"><td class="ln" aria-hidden="true"></td><td class="ln" aria-hidden="true"></td><td class="sign" aria-hidden="true"></td><td class="line">${esc(l.text)}</td></tr>`;
    }
    const sign = l.kind === 'add' ? '+' : l.kind === 'del' ? '-' : ' ';
    const label = l.kind === 'add' ? 'added' : l.kind === 'del' ? 'removed' : '';
    return `<tr class="d-${l.kind}"><td class="ln">${l.oldNo ?? ''}</td><td class="ln">${l.newNo ?? ''}</td><td class="sign"${label ? ` aria-label="${label}"` : ''}>${sign}</td><td class="line"><code class="hljs">${highlight(l.text, language) || ' '}</code></td></tr>`;
  });
  return `<div class="diff-scroll"><table class="diff"><caption class="visually-hidden">Changes</caption><tbody>${rows.join('')}</tbody></table></div>`;
}

/** The diff lines of an edit: the unified diff when given, else old → new. */
export function editDiffLines(m, args) {
  const unified = m.unifiedDiff || (m.diff && m.diff.unifiedDiff) || argOf(args, 'diffString', 'diff', 'patch');
  if (typeof unified === 'string' && unified.includes('@@')) return parseUnifiedDiff(unified);
  const d = m.diff && typeof m.diff === 'object' ? m.diff : null;
  const oldString = d ? d.oldString : argOf(args, 'oldString', 'old_string');
  const newString = d ? d.newString : argOf(args, 'newString', 'new_string');
  if (oldString == null && newString == null) return null;
  return diffLines(oldString || '', newString || '', d && Number.isFinite(d.startLine) ? d.startLine : 1);
}

function renderFileEdit(doc) {
  const m = doc.metadata;
  const args = doc.arguments;
  const op = m.operation || (doc.ended ? 'edit' : '');
  const path = m.filePath || argOf(args, 'path', 'filePath', 'file_path', 'target_file') || '';
  const lang = m.language || '';
  let body = '';
  let stats = '';
  if (op === 'delete') {
    body = '<p class="file-note">The file is deleted.</p>';
  } else if (op === 'rename') {
    const to = m.newPath || argOf(args, 'newPath', 'new_path', 'destination') || '';
    body = `<p class="file-note">Renamed to <code>${esc(to)}</code></p>`;
    const lines = editDiffLines(m, args);
    if (lines) body += diffTable(lines, lang);
  } else if (op === 'create') {
    const content = doc.content ?? argOf(args, 'contents', 'content', 'fileText', 'streamContent');
    const n = content ? String(content).replace(/\n$/, '').split('\n').length : 0;
    stats = `<span class="diffstat"><span class="plus">+${m.linesAdded ?? n}</span></span>`;
    body = content != null ? codeView(content, lang, 1, !doc.ended) : '<p class="file-note">Writing…</p>';
  } else {
    const lines = editDiffLines(m, args);
    if (lines) {
      const c = countChanges(lines);
      const added = m.linesAdded ?? c.added;
      const removed = m.linesRemoved ?? c.removed;
      stats = `<span class="diffstat"><span class="plus">+${added}</span> <span class="minus">−${removed}</span></span>`;
      body = diffTable(lines, lang);
    } else if (doc.content) {
      body = codeView(doc.content, lang, null, !doc.ended);
    } else {
      body = `<p class="file-note">${doc.ended ? 'No diff reported.' : 'Editing…'}</p>`;
    }
  }
  const opBadge = op ? badge(op, `op op-${esc(op)}`) : '';
  const rejected = m.rejected ? badge('rejected', 'rejected', m.reason || '') : '';
  const reason = m.rejected && m.reason ? `<p class="reject-reason">${esc(m.reason)}</p>` : '';
  return `<figcaption class="doc-head file-head">
      ${opBadge}<code class="path">${esc(path)}</code>
      ${lang ? `<span class="lang">${esc(lang)}</span>` : ''}
      ${stats}${rejected}${streamingMark(doc)}
    </figcaption>
    ${reason}${body}`;
}

// ---- terminal_command ---------------------------------------------------

function renderTerminal(doc) {
  const m = doc.metadata;
  const args = doc.arguments;
  const command = stripAnsi(m.command || argOf(args, 'command', 'cmd') || '');
  const cwd = m.workingDirectory || argOf(args, 'workingDirectory', 'cwd', 'working_directory') || '';
  const output = m.output ?? (doc.result && typeof doc.result.data === 'object' && doc.result.data ? doc.result.data.output : undefined);
  const badges = [];
  if (m.rejected) {
    badges.push(badge('rejected', 'rejected', m.reason || ''));
  } else if (typeof m.exitCode === 'number') {
    badges.push(badge(`exit ${m.exitCode}`, m.exitCode === 0 ? 'ok exit-code' : 'fail exit-code', `exit code ${m.exitCode}`));
  } else if (!doc.ended) {
    badges.push(badge('running', 'running'));
  } else {
    badges.push(badge('did not run', 'muted'));
  }
  if (typeof m.duration_ms === 'number' && doc.ended && !m.rejected) badges.push(badge(formatDuration(m.duration_ms), 'muted duration'));
  for (const p of Array.isArray(m.permissions) ? m.permissions : []) badges.push(badge(p, 'perm'));
  const outText = output == null || output === '' ? '' : stripAnsi(output).replace(/\n$/, '');
  const reason = m.rejected && m.reason ? `<p class="reject-reason">${esc(m.reason)}</p>` : '';
  return `<figcaption class="doc-head term-head">
      <span class="term-dots" aria-hidden="true"><i></i><i></i><i></i></span>
      <span class="term-title">Terminal</span>
      ${cwd ? `<code class="cwd" title="working directory">${esc(cwd)}</code>` : ''}
      <span class="spacer"></span>${badges.join('')}${streamingMark(doc)}
    </figcaption>
    <pre class="term-body"><code><span class="term-prompt" aria-hidden="true">$ </span><span class="term-command">${esc(command)}</span>${outText ? `\n<span class="term-output">${esc(outText)}</span>` : ''}</code></pre>${reason}`;
}

// ---- plan ---------------------------------------------------------------

/** The plan's todos from its metadata, or from the tool arguments while it streams. */
export function planTodos(doc) {
  const fromMeta = Array.isArray(doc.metadata.todos) ? doc.metadata.todos : null;
  const fromArgs = doc.arguments && Array.isArray(doc.arguments.todos) ? doc.arguments.todos : null;
  const list = fromMeta || fromArgs || [];
  return list.map((t, i) => ({
    id: String(t.id ?? `todo-${i + 1}`),
    content: t.content ?? t.text ?? t.title ?? '',
    status: normalizeStatus(t.status),
    dependencies: Array.isArray(t.dependencies) ? t.dependencies.map(String) : [],
  }));
}

function todoItem(t) {
  const icon = STATUS_ICONS[t.status] || '○';
  const deps = t.dependencies.length ? `<span class="deps">after: ${t.dependencies.map(esc).join(', ')}</span>` : '';
  return `<li class="todo" data-todo-id="${esc(t.id)}" data-status="${esc(t.status)}">
      <span class="todo-check" role="img" aria-label="${esc(STATUS_LABELS[t.status] || t.status)}">${icon}</span>
      <span class="todo-main"><span class="todo-text">${esc(t.content || t.id)}</span>${deps}</span>
      ${badge(STATUS_LABELS[t.status] || t.status, `status s-${esc(t.status)}`)}
    </li>`;
}

function renderPlan(doc) {
  const m = doc.metadata;
  const args = doc.arguments || {};
  const title = m.title || args.name || args.title || 'Plan';
  const overview = m.overview || args.overview || '';
  const overrides = doc.todoOverrides || {};
  const todos = planTodos(doc).map((t) => (overrides[t.id] ? { ...t, status: overrides[t.id] } : t));
  const done = todos.filter((t) => t.status === 'completed').length;
  const markdown = doc.content || (typeof args.plan === 'string' ? args.plan : '');
  const progress = todos.length
    ? `<div class="progress"><progress max="${todos.length}" value="${done}" aria-label="todos completed"></progress><span>${done}/${todos.length} done</span></div>`
    : '';
  return `<header class="plan-head">
      <span class="kicker">Plan ${streamingMark(doc)}</span>
      <h3 class="plan-title">${esc(title)}</h3>
      ${overview ? `<p class="plan-overview">${esc(overview)}</p>` : ''}
      ${progress}
    </header>
    ${todos.length ? `<ol class="todos">${todos.map(todoItem).join('')}</ol>` : ''}
    ${markdown ? `<details class="plan-doc" data-key="plan-doc"><summary>Plan document</summary><div class="markdown">${renderMarkdown(markdown)}</div></details>` : ''}`;
}

// ---- todo_update --------------------------------------------------------

/** The todos of a todo_update: metadata, else the tool arguments. */
export function updateTodos(doc) {
  const list = Array.isArray(doc.metadata.todos)
    ? doc.metadata.todos
    : doc.arguments && Array.isArray(doc.arguments.todos)
      ? doc.arguments.todos
      : [];
  return list.map((t) => ({ id: String(t.id ?? ''), status: normalizeStatus(t.status), content: t.content ?? '' }));
}

function renderTodoUpdate(doc, ctx) {
  const todos = updateTodos(doc);
  const items = todos.map((t) => {
    const text = t.content || (ctx && ctx.todoText(t.id)) || t.id;
    return `<li data-todo-id="${esc(t.id)}" data-status="${esc(t.status)}"><span class="todo-check" aria-hidden="true">${STATUS_ICONS[t.status] || '○'}</span> <span class="todo-text">${esc(text)}</span> ${badge(STATUS_LABELS[t.status] || t.status, `status s-${esc(t.status)}`)}</li>`;
  });
  return `<span class="kicker">Todos updated ${streamingMark(doc)}</span><ul class="todo-changes">${items.join('') || '<li class="muted">no changes</li>'}</ul>`;
}

// ---- clarification ------------------------------------------------------
// A form: one choice per question (several where the question allows them),
// an optional note, and one button that sends it all as one turn.

function renderClarification(doc) {
  const args = doc.arguments || {};
  const questions = clarificationQuestions(doc);
  const draft = doc.draft || emptyDraft();
  const m = doc.metadata || {};
  const sent = Boolean(doc.sent) || (Array.isArray(m.answers) && m.answers.length > 0 && !m.awaiting);
  const intro = doc.content || args.title || '';
  const qs = questions.map((q) => {
    const answered = isChosenAny(draft, q);
    const opts = q.options.map((o) => {
      const chosen = isChosen(draft, q.id, o.id);
      return `<button type="button" class="option${chosen ? ' chosen' : ''}" data-action="answer" ${CONTROL_MARK} data-focus-key="${esc(`option ${q.id} ${o.id}`)}" data-question-id="${esc(q.id)}" data-option-id="${esc(o.id)}" aria-pressed="${chosen}"${sent ? ' disabled' : ''}>${esc(o.label)}</button>`;
    });
    const how = q.options.length === 0 ? 'answer in the note below' : q.multiple ? 'choose any' : '';
    return `<fieldset class="question${answered ? ' is-answered' : ''}${q.multiple ? ' is-multiple' : ''}" data-question-id="${esc(q.id)}"><legend>${esc(q.text)}${how ? ` <span class="muted how">(${how})</span>` : ''}</legend><div class="options">${opts.join('')}</div></fieldset>`;
  });
  const head = `<header class="clar-head"><span class="kicker">Question ${streamingMark(doc)}</span>${intro ? `<div class="markdown">${renderMarkdown(intro)}</div>` : ''}</header>`;
  if (!questions.length) return head;
  const note = sent && !draft.note.trim() ? '' : `<label class="answer-note"><span class="muted">${sent ? 'Sent with the answers:' : 'Anything to add? (optional, sent with the answers)'}</span><textarea rows="2" data-action="note" ${CONTROL_MARK} data-focus-key="note"${sent ? ' readonly' : ''}>${esc(draft.note)}</textarea></label>`;
  let footer;
  if (sent) {
    footer = '<p class="answered">Answered.</p>';
  } else {
    const left = unanswered(questions, draft).length;
    const ready = readyToSend(questions, draft);
    const status = left
      ? questions.length > 1
        ? `Choose an answer for each question (${left} of ${questions.length} left).`
        : 'Choose an answer.'
      : ready
        ? 'Ready to send.'
        : 'Write your answer in the note.';
    const skipped = m.awaiting ? 'The agent waits for your answers. ' : m.rejected ? 'The agent went on without an answer; yours continue the conversation. ' : '';
    const hint = doc.answerProblem ? `<span class="answer-problem" role="alert">${esc(doc.answerProblem)}</span>` : esc(skipped + status);
    const label = questions.length > 1 ? 'Send answers' : 'Send answer';
    footer = `<div class="answer-actions"><button type="button" class="primary small send-answers" data-action="send-answers" ${CONTROL_MARK} data-focus-key="send"${ready ? '' : ' disabled'}>${label}</button><p class="muted hint-line" data-role="answer-hint">${hint}</p></div>`;
  }
  return `${head}${qs.join('')}${note}${footer}`;
}

function isChosenAny(draft, q) {
  return q.options.some((o) => isChosen(draft, q.id, o.id));
}

// ---- tool_call ----------------------------------------------------------

function argSummary(args) {
  if (!args || typeof args !== 'object') return '';
  if (args.args && typeof args.args === 'object') {
    const inner = argSummary(args.args); // MCP calls wrap the tool's own arguments
    if (inner) return inner;
  }
  const preferred = ['path', 'target_file', 'filePath', 'query', 'pattern', 'globPattern', 'url', 'command', 'directory', 'target_directory'];
  for (const k of preferred) if (typeof args[k] === 'string' && args[k]) return args[k];
  for (const v of Object.values(args)) if (typeof v === 'string' && v) return v;
  return '';
}

function renderToolCall(doc) {
  const m = doc.metadata;
  const name = m.toolName || doc.toolName || 'tool';
  const args = m.arguments ?? doc.arguments;
  const result = m.result ?? doc.result;
  const status = result ? result.status : doc.ended ? 'error' : 'running';
  const rejected = Boolean(m.rejected || (result && result.rejected));
  const reason = m.reason || (result && result.reason) || '';
  const summary = argSummary(args);
  const statusBadge = rejected
    ? badge('rejected', 'rejected', reason)
    : status === 'success'
      ? badge('success', 'ok')
      : status === 'running'
        ? badge('running', 'running')
        : badge(status || 'error', 'fail');
  const duration = typeof m.duration_ms === 'number' && doc.ended ? badge(formatDuration(m.duration_ms), 'muted duration') : '';
  let resultHTML = '';
  if (result) {
    const data = result.data;
    const body = data == null ? '<p class="muted">no data</p>' : typeof data === 'string' ? `<pre class="code plain-out">${esc(data)}</pre>` : `<pre class="code"><code class="hljs language-json">${highlight(json(data), 'json')}</code></pre>`;
    resultHTML = `<h4>Result ${badge(rejected ? 'rejected' : result.status || '', rejected ? 'rejected' : result.status === 'success' ? 'ok' : 'fail')}</h4>${reason ? `<p class="reject-reason">${esc(reason)}</p>` : ''}${body}`;
  } else if (!doc.ended) {
    resultHTML = '<p class="muted">Waiting for the result…</p>';
  }
  const raw = m.rawKind ? `<p class="muted small">kind: <code>${esc(m.rawKind)}</code>${m.toolCallId ? ` · id: <code>${esc(m.toolCallId)}</code>` : ''}</p>` : '';
  return `<details class="tool" data-key="tool"><summary>
      <span class="tool-icon" aria-hidden="true">⚙</span>
      <code class="tool-name">${esc(name)}</code>
      ${summary ? `<span class="tool-arg">${esc(summary)}</span>` : ''}
      <span class="spacer"></span>${statusBadge}${duration}
    </summary>
    <div class="tool-body">
      <h4>Arguments</h4>
      ${args === undefined ? '<p class="muted">none yet</p>' : `<pre class="code"><code class="hljs language-json">${highlight(json(args), 'json')}</code></pre>`}
      ${resultHTML}${raw}
    </div></details>`;
}

// ---- error --------------------------------------------------------------

function renderError(doc) {
  const m = doc.metadata;
  const details = m.details == null || m.details === '' ? '' : typeof m.details === 'string' ? m.details : json(m.details);
  return `<div class="err-head"><span class="err-icon" aria-hidden="true">!</span>
      ${m.errorCode ? `<code class="err-code">${esc(m.errorCode)}</code>` : ''}
      ${m.source ? `<span class="err-source">from ${esc(m.source)}</span>` : ''}${streamingMark(doc)}</div>
    <p class="err-message">${esc(doc.content || 'An error occurred.')}</p>
    ${details ? `<details data-key="err-details"><summary>Details</summary><pre class="code plain-out">${esc(details)}</pre></details>` : ''}`;
}

// ---- approval -----------------------------------------------------------
// A tool call the agent asks permission for (ACP mode): its options as
// buttons while it waits, then who answered and how.

const BY = { client: 'you', policy: 'the gateway\'s policy', timeout: 'nobody in time', cancel: 'the cancel' };

function approvalHTML(doc) {
  const m = doc.metadata || {};
  if (doc.type === 'clarification' || !m.status) return '';
  if (m.status === 'awaiting_approval' && Array.isArray(m.options)) {
    const busy = Boolean(doc.responding);
    const buttons = m.options.map(
      (o) =>
        `<button type="button" class="option${String(o.kind).startsWith('reject') ? ' reject' : ''}" data-action="approve" ${CONTROL_MARK} data-focus-key="${esc(`approve ${o.optionId}`)}" data-option-id="${esc(o.optionId)}"${busy ? ' disabled' : ''}>${esc(o.name || o.optionId)}</button>`,
    );
    const problem = doc.answerProblem ? `<span class="answer-problem" role="alert">${esc(doc.answerProblem)}</span>` : '';
    return `<div class="approval" role="group" aria-label="Permission"><p class="approval-ask">The agent waits for your permission.</p><div class="options">${buttons.join('')}</div>${problem}</div>`;
  }
  const a = m.answer || {};
  const how = m.status === 'approved' ? 'Approved' : 'Rejected';
  return `<p class="approval-outcome" data-approval="${esc(m.status)}">${how}${a.optionId ? ` (${esc(a.optionId)})` : ''} by ${esc(BY[a.by] || a.by || 'the agent')}.</p>`;
}

// ---- dispatch -----------------------------------------------------------

const RENDERERS = {
  text: renderText,
  code_block: renderCodeBlock,
  code_reference: renderCodeReference,
  file_edit: renderFileEdit,
  terminal_command: renderTerminal,
  plan: renderPlan,
  todo_update: renderTodoUpdate,
  clarification: renderClarification,
  tool_call: renderToolCall,
  error: renderError,
};

/** The element a document of the given type is rendered into. */
export function createDocElement(doc) {
  const figure = ['code_block', 'code_reference', 'file_edit', 'terminal_command'].includes(doc.type);
  const el = document.createElement(figure ? 'figure' : 'div');
  el.className = `doc doc-${doc.type}`;
  el.dataset.docType = doc.type;
  el.dataset.docId = doc.id;
  el.dataset.sequence = String(doc.sequence ?? '');
  if (doc.type === 'error') el.setAttribute('role', 'alert');
  if (doc.type === 'todo_update') el.setAttribute('role', 'status');
  if (doc.type === 'terminal_command') el.classList.add('terminal');
  if (!(doc.type in RENDERERS)) el.classList.add('doc-unknown');
  return el;
}

/** Re-renders a document into its element, keeping the open state of its <details>. */
export function renderDocument(doc, ctx) {
  const el = doc.el;
  const open = new Map();
  for (const d of el.querySelectorAll('details[data-key]')) open.set(d.dataset.key, d.open);
  // the control that has the focus keeps it (and a text field its selection) across the render
  const active = document.activeElement;
  const focus = active && el.contains(active) && active.dataset.focusKey ? { key: active.dataset.focusKey, start: active.selectionStart, end: active.selectionEnd } : null;
  const render = RENDERERS[doc.type];
  el.innerHTML = render
    ? render(doc, ctx) + approvalHTML(doc)
    : `<details data-key="unknown"><summary>${esc(doc.type)} document</summary><pre class="code plain-out">${esc(json({ content: doc.content, metadata: doc.metadata }))}</pre></details>`;
  for (const d of el.querySelectorAll('details[data-key]')) {
    if (open.has(d.dataset.key)) d.open = open.get(d.dataset.key);
  }
  for (const c of el.querySelectorAll(`[${CONTROL_MARK}]`)) {
    controls.add(c);
    c.removeAttribute('data-control');
  }
  if (focus) {
    const again = [...el.querySelectorAll('[data-focus-key]')].find((c) => controls.has(c) && c.dataset.focusKey === focus.key);
    if (again && !again.disabled) {
      again.focus({ preventScroll: true });
      if (typeof focus.start === 'number' && typeof again.setSelectionRange === 'function') again.setSelectionRange(focus.start, focus.end);
    }
  }
  el.classList.toggle('is-streaming', !doc.ended);
  const m = doc.metadata || {};
  if (doc.type === 'terminal_command') {
    if (typeof m.exitCode === 'number') el.dataset.exitCode = String(m.exitCode);
    else delete el.dataset.exitCode;
  }
  if (doc.type === 'file_edit' && m.operation) el.dataset.operation = m.operation;
  // a clarification "rejected" by the agent was only skipped: it stays answerable
  const rejected = doc.type !== 'clarification' && Boolean(m.rejected || (m.result && m.result.rejected));
  el.classList.toggle('is-rejected', rejected);
  if (rejected) el.dataset.rejected = 'true';
  if (doc.type === 'tool_call') {
    const result = m.result ?? doc.result;
    el.classList.toggle('is-error', Boolean(result && result.status === 'error'));
    el.classList.toggle('is-running', !result && !doc.ended);
  }
}
