// Unit tests of Conversation: "new conversation" wins over a turn that ends later.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Conversation } from '../src/conversation.js';

test('a turn adopts its conversation while no new one was started', () => {
  const shown = [];
  const c = new Conversation((id) => shown.push(id));
  const turn = c.generation;
  assert.equal(c.adopt(turn, 'conv_1'), true);
  assert.equal(c.id, 'conv_1');
  assert.equal(c.adopt(turn, 'conv_1'), true);
  assert.deepEqual(shown, ['conv_1']);
  assert.equal(c.adopt(turn, ''), false);
  assert.equal(c.id, 'conv_1');
});

test('a turn that began before "new conversation" does not bring its conversation back', () => {
  const c = new Conversation();
  const first = c.generation;
  c.adopt(first, 'conv_1'); // response_start
  c.startNew(); // the user starts over while the turn streams
  assert.equal(c.id, null);
  assert.equal(c.adopt(first, 'conv_1'), false); // done
  assert.equal(c.id, null);

  const second = c.generation;
  assert.equal(c.adopt(second, 'conv_2'), true);
  assert.equal(c.id, 'conv_2');
});

test('set chooses a conversation without starting a generation', () => {
  const c = new Conversation();
  const turn = c.generation;
  c.set('conv_old');
  assert.equal(c.generation, turn);
  assert.equal(c.adopt(turn, 'conv_old'), true);
});
