// Answering a clarification: the choices made in its form, checked and
// turned into one /v1/chat turn. No DOM here, so that it is unit-tested.
//
// POST /v1/chat takes `answers: [{questionId, optionId}]`; an answer carries
// no text of its own. A note typed under the questions goes in the same
// request as `prompt`, which the gateway appends to the answers' lines.

/**
 * @typedef {{id: string, label: string}} Choice
 * @typedef {{id: string, text: string, multiple: boolean, options: Choice[]}} Question
 * @typedef {{choices: Record<string, string[]>, note: string}} Draft
 */

/** A draft with nothing chosen. */
export function emptyDraft() {
  return { choices: {}, note: '' };
}

/**
 * The questions of a clarification document (its metadata, or the tool
 * call's arguments while those are all that has arrived), ids filled in as
 * the gateway fills them.
 * @returns {Question[]}
 */
export function clarificationQuestions(doc) {
  const m = (doc && doc.metadata) || {};
  const args = (doc && doc.arguments) || {};
  const list = Array.isArray(m.questions) ? m.questions : Array.isArray(args.questions) ? args.questions : [];
  const out = [];
  list.forEach((q, qi) => {
    if (!q || typeof q !== 'object') return;
    const id = String(q.id || `q${qi + 1}`);
    const options = [];
    (Array.isArray(q.options) ? q.options : []).forEach((o, oi) => {
      if (!o || typeof o !== 'object') return;
      const oid = String(o.id || oi + 1);
      options.push({ id: oid, label: String(o.label || o.text || oid) });
    });
    out.push({ id, text: String(q.text || q.prompt || q.question || id), multiple: q.allowMultiple === true, options });
  });
  return out;
}

/**
 * The draft after optionId was picked for question: a question that takes
 * one answer keeps only this option (as a radio button does), one that
 * allows several turns the option on or off. An option the question does
 * not have changes nothing.
 * @param {Draft} draft
 * @param {Question} question
 * @returns {Draft}
 */
export function choose(draft, question, optionId) {
  if (!question || !question.options.some((o) => o.id === optionId)) return draft;
  const had = draft.choices[question.id] || [];
  let next;
  if (!question.multiple) next = [optionId];
  else if (had.includes(optionId)) next = had.filter((id) => id !== optionId);
  else next = [...had, optionId];
  return { ...draft, choices: { ...draft.choices, [question.id]: next } };
}

/** Whether optionId is chosen for the question with id questionId. */
export function isChosen(draft, questionId, optionId) {
  return (draft.choices[questionId] || []).includes(optionId);
}

/** The options chosen for question, in the question's order (only options it has). */
function chosenOptions(draft, question) {
  const chosen = draft.choices[question.id] || [];
  return question.options.filter((o) => chosen.includes(o.id));
}

/**
 * The questions still waiting for a choice. A question without options
 * cannot be answered with one (its answer can only go in the note), so it
 * is never waiting.
 * @returns {Question[]}
 */
export function unanswered(questions, draft) {
  return questions.filter((q) => q.options.length > 0 && chosenOptions(draft, q).length === 0);
}

/** Whether the form can be sent: every question has a choice, and there is something to send. */
export function readyToSend(questions, draft) {
  if (unanswered(questions, draft).length) return false;
  return questions.some((q) => chosenOptions(draft, q).length > 0) || draft.note.trim() !== '';
}

/**
 * The turn that sends the form: the answers in the order of the questions
 * (and of their options), the note as prompt, and the text the transcript
 * shows for it. Null while the form is not ready to send.
 * @returns {{answers: {questionId: string, optionId: string}[], prompt?: string, summary: string} | null}
 */
export function answerTurn(questions, draft) {
  if (!readyToSend(questions, draft)) return null;
  const answers = [];
  const lines = [];
  for (const q of questions) {
    const chosen = chosenOptions(draft, q);
    if (!chosen.length) continue;
    for (const o of chosen) answers.push({ questionId: q.id, optionId: o.id });
    lines.push(`${q.text}\n→ ${chosen.map((o) => o.label).join(', ')}`);
  }
  const note = draft.note.trim();
  if (note) lines.push(note);
  const turn = { answers, summary: lines.join('\n\n') };
  if (note) turn.prompt = note;
  return turn;
}
