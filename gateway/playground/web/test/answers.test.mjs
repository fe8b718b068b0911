// Unit tests of the clarification form: choices per question, the note, and
// the one turn that sends them.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { answerTurn, choose, clarificationQuestions, emptyDraft, isChosen, readyToSend, unanswered } from '../src/answers.js';

// The ask scenario's clarification as the gateway sends it.
const askDoc = {
  type: 'clarification',
  metadata: {
    questions: [
      {
        id: 'q1',
        text: 'Which authentication method should the API use?',
        options: [
          { id: 'jwt', label: 'JSON Web Tokens (stateless)' },
          { id: 'session', label: 'Server-side sessions with a cookie' },
        ],
      },
      {
        id: 'q2',
        text: 'Where should user records be stored?',
        options: [
          { id: 'postgres', label: 'PostgreSQL' },
          { id: 'sqlite', label: 'SQLite file' },
        ],
      },
    ],
    toolCallId: 'tool_1',
    rejected: true,
  },
};

test('clarificationQuestions reads the metadata, or the arguments until it arrives, filling in ids', () => {
  const qs = clarificationQuestions(askDoc);
  assert.deepEqual(
    qs.map((q) => [q.id, q.multiple, q.options.map((o) => o.id)]),
    [
      ['q1', false, ['jwt', 'session']],
      ['q2', false, ['postgres', 'sqlite']],
    ],
  );
  assert.equal(qs[1].text, 'Where should user records be stored?');

  const streaming = {
    metadata: {},
    arguments: { questions: [{ prompt: 'Tabs or spaces?', options: [{ text: 'Tabs' }, { id: 'sp', label: 'Spaces' }], allowMultiple: true }, null, 'x'] },
  };
  assert.deepEqual(clarificationQuestions(streaming), [
    {
      id: 'q1',
      text: 'Tabs or spaces?',
      multiple: true,
      options: [
        { id: '1', label: 'Tabs' },
        { id: 'sp', label: 'Spaces' },
      ],
    },
  ]);
  assert.deepEqual(clarificationQuestions({ metadata: {} }), []);
});

test('a question that takes one answer keeps the last option chosen, as a radio button does', () => {
  const [q1] = clarificationQuestions(askDoc);
  let d = emptyDraft();
  d = choose(d, q1, 'jwt');
  assert.ok(isChosen(d, 'q1', 'jwt'));
  d = choose(d, q1, 'session');
  assert.ok(!isChosen(d, 'q1', 'jwt'));
  assert.ok(isChosen(d, 'q1', 'session'));
  d = choose(d, q1, 'session'); // choosing it again keeps it
  assert.deepEqual(d.choices.q1, ['session']);
});

test('choose does not change the draft it is given, nor take an option the question does not have', () => {
  const [q1] = clarificationQuestions(askDoc);
  const d = emptyDraft();
  const after = choose(d, q1, 'jwt');
  assert.deepEqual(d, emptyDraft());
  assert.equal(choose(after, q1, 'postgres'), after);
  assert.equal(choose(after, undefined, 'jwt'), after);
});

test('a question that allows several answers turns each option on and off', () => {
  const q = { id: 'langs', text: 'Which languages?', multiple: true, options: [{ id: 'go', label: 'Go' }, { id: 'js', label: 'JavaScript' }] };
  let d = choose(emptyDraft(), q, 'js');
  d = choose(d, q, 'go');
  assert.deepEqual(d.choices.langs, ['js', 'go']);
  d = choose(d, q, 'js');
  assert.deepEqual(d.choices.langs, ['go']);
  d = choose(d, q, 'go');
  assert.deepEqual(unanswered([q], d), [q], 'turning every option off leaves the question open');
});

test('the form is ready to send only once every question has an answer', () => {
  const qs = clarificationQuestions(askDoc);
  let d = emptyDraft();
  assert.equal(unanswered(qs, d).length, 2);
  assert.equal(readyToSend(qs, d), false);
  assert.equal(answerTurn(qs, d), null);

  d = choose(d, qs[0], 'jwt');
  assert.deepEqual(unanswered(qs, d).map((q) => q.id), ['q2']);
  assert.equal(readyToSend(qs, d), false);
  d = { ...d, note: 'a note alone does not answer q2' };
  assert.equal(readyToSend(qs, d), false);
  assert.equal(answerTurn(qs, d), null);

  d = choose(d, qs[1], 'sqlite');
  assert.deepEqual(unanswered(qs, d), []);
  assert.equal(readyToSend(qs, d), true);
});

test('answerTurn sends every answer in the order of the questions, in one turn', () => {
  const qs = clarificationQuestions(askDoc);
  let d = emptyDraft();
  d = choose(d, qs[1], 'sqlite'); // answered out of order
  d = choose(d, qs[0], 'jwt');
  d = choose(d, qs[0], 'session');
  assert.deepEqual(answerTurn(qs, d), {
    answers: [
      { questionId: 'q1', optionId: 'session' },
      { questionId: 'q2', optionId: 'sqlite' },
    ],
    summary: 'Which authentication method should the API use?\n→ Server-side sessions with a cookie\n\nWhere should user records be stored?\n→ SQLite file',
  });
});

test('the note goes with the answers as the prompt, trimmed; a blank one is left out', () => {
  const qs = clarificationQuestions(askDoc);
  let d = choose(choose(emptyDraft(), qs[0], 'jwt'), qs[1], 'postgres');
  assert.equal('prompt' in answerTurn(qs, { ...d, note: '  \n ' }), false);
  d = { ...d, note: '  Keep tokens short-lived.\n' };
  const turn = answerTurn(qs, d);
  assert.equal(turn.prompt, 'Keep tokens short-lived.');
  assert.equal(turn.answers.length, 2);
  assert.ok(turn.summary.endsWith('\n\nKeep tokens short-lived.'), turn.summary);
});

test('several answers to one question are sent in the order of its options', () => {
  const qs = [
    { id: 'q1', text: 'Which targets?', multiple: true, options: [{ id: 'linux', label: 'Linux' }, { id: 'mac', label: 'macOS' }, { id: 'win', label: 'Windows' }] },
    { id: 'q2', text: 'Ship it?', multiple: false, options: [{ id: 'yes', label: 'Yes' }] },
  ];
  let d = choose(emptyDraft(), qs[0], 'win');
  d = choose(d, qs[0], 'linux');
  d = choose(d, qs[1], 'yes');
  const turn = answerTurn(qs, d);
  assert.deepEqual(turn.answers, [
    { questionId: 'q1', optionId: 'linux' },
    { questionId: 'q1', optionId: 'win' },
    { questionId: 'q2', optionId: 'yes' },
  ]);
  assert.match(turn.summary, /→ Linux, Windows/);
});

test('a question without options is answered in the note', () => {
  const qs = clarificationQuestions({ metadata: { questions: [{ id: 'name', text: 'What should the service be called?', options: [] }] } });
  let d = emptyDraft();
  assert.deepEqual(unanswered(qs, d), [], 'it waits for no choice');
  assert.equal(readyToSend(qs, d), false, 'but there is nothing to send yet');
  d = { ...d, note: 'greeter' };
  assert.deepEqual(answerTurn(qs, d), { answers: [], prompt: 'greeter', summary: 'greeter' });
});

test('a single question is answered with the same form', () => {
  const qs = clarificationQuestions({ metadata: { questions: [askDoc.metadata.questions[0]] } });
  assert.equal(readyToSend(qs, emptyDraft()), false);
  const turn = answerTurn(qs, choose(emptyDraft(), qs[0], 'jwt'));
  assert.deepEqual(turn.answers, [{ questionId: 'q1', optionId: 'jwt' }]);
});

test('a choice for an option the question no longer has does not count', () => {
  // the questions can still change while the clarification streams
  const before = clarificationQuestions({ arguments: { questions: [{ id: 'q1', options: [{ id: 'a', label: 'A' }] }] } });
  const d = choose(emptyDraft(), before[0], 'a');
  const after = clarificationQuestions({ metadata: { questions: [{ id: 'q1', text: 'Q', options: [{ id: 'b', label: 'B' }] }] } });
  assert.deepEqual(unanswered(after, d).map((q) => q.id), ['q1']);
  assert.equal(answerTurn(after, d), null);
});
