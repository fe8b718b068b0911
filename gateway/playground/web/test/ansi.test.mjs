// Unit tests of stripAnsi: terminal output shown as plain text.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { stripAnsi } from '../src/ansi.js';

test('stripAnsi drops SGR colours and cursor control', () => {
  assert.equal(stripAnsi('\x1b[31mred\x1b[0m \x1b[1;32mgreen\x1b[m'), 'red green');
  assert.equal(stripAnsi('\x1b[2J\x1b[H\x1b[?25lscreen\x1b[?25h\x1b[K'), 'screen');
  assert.equal(stripAnsi('\x9b31mC1 form\x9b0m'), 'C1 form');
});

test('stripAnsi drops OSC strings: hyperlinks and titles', () => {
  assert.equal(stripAnsi('\x1b]8;;https://example.com\x07link\x1b]8;;\x07'), 'link');
  assert.equal(stripAnsi('\x1b]8;id=1;https://x.y\x1b\\link\x1b]8;;\x1b\\ done'), 'link done');
  assert.equal(stripAnsi('\x1b]0;window title\x07text'), 'text');
});

test('stripAnsi drops other escapes and C0 controls but tab and newline', () => {
  assert.equal(stripAnsi('\x1b(Bcharset\x1b=\x1b7x\x1b8'), 'charsetx');
  assert.equal(stripAnsi('a\tb\nc\x00\x07\x08\x0b\x0c\x7f'), 'a\tb\nc');
  assert.equal(stripAnsi('trailing escape\x1b'), 'trailing escape');
});

test('stripAnsi keeps text that has no escapes', () => {
  const s = 'ünïcödé → ✓ 100%\n\tindented [31m not an escape';
  assert.equal(stripAnsi(s), s);
  assert.equal(stripAnsi(null), '');
});

test('stripAnsi: a carriage return overwrites the line, CRLF is a newline', () => {
  assert.equal(stripAnsi('one\r\ntwo\r\n'), 'one\ntwo\n');
  assert.equal(stripAnsi('progress 10%\rprogress 55%\rprogress 100%\ndone'), 'progress 100%\ndone');
  assert.equal(stripAnsi('abcdef\rxy'), 'xycdef');
});

test('stripAnsi: an unterminated OSC string ends at the end of its line', () => {
  assert.equal(stripAnsi('before\n\x1b]0;unterminated title\nline after\nlast'), 'before\n\nline after\nlast');
  assert.equal(stripAnsi('a\x9d8;;https://x.y\nb'), 'a\nb');
  assert.equal(stripAnsi('\x1b]0;title\x07kept\n\x1b]0;cut'), 'kept\n');
});
