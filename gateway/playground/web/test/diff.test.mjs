// Unit tests of the playground's pure helpers (no DOM).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { countChanges, diffLines, parseUnifiedDiff } from '../src/diff.js';

test('parseUnifiedDiff numbers old and new lines', () => {
  const lines = parseUnifiedDiff('--- a/x.py\n+++ b/x.py\n@@ -3,4 +3,3 @@\n import sys\n-A = 1\n-B = 2\n+from c import A, B\n \n');
  assert.deepEqual(
    lines.map((l) => [l.kind, l.oldNo, l.newNo, l.text]),
    [
      ['meta', null, null, '--- a/x.py'],
      ['meta', null, null, '+++ b/x.py'],
      ['hunk', null, null, '@@ -3,4 +3,3 @@'],
      ['ctx', 3, 3, 'import sys'],
      ['del', 4, null, 'A = 1'],
      ['del', 5, null, 'B = 2'],
      ['add', null, 4, 'from c import A, B'],
      ['ctx', 6, 5, ''],
    ],
  );
  assert.deepEqual(countChanges(lines), { added: 1, removed: 2 });
});

test('diffLines keeps common lines as context, removals first', () => {
  const lines = diffLines('a\nb\nc\n', 'a\nB\nc\nd\n', 10);
  assert.deepEqual(
    lines.map((l) => [l.kind, l.oldNo, l.newNo, l.text]),
    [
      ['hunk', null, null, '@@ -10,3 +10,4 @@'],
      ['ctx', 10, 10, 'a'],
      ['del', 11, null, 'b'],
      ['add', null, 11, 'B'],
      ['ctx', 12, 12, 'c'],
      ['add', null, 13, 'd'],
    ],
  );
});

test('diffLines of a new text is all additions', () => {
  const lines = diffLines('', 'x\ny');
  assert.deepEqual(countChanges(lines), { added: 2, removed: 0 });
  assert.equal(lines[0].text, '@@ -1,0 +1,2 @@');
});

test('diffLines falls back to remove-all/add-all for huge inputs', () => {
  const big = Array.from({ length: 1000 }, (_, i) => `line ${i}`).join('\n');
  const lines = diffLines(big, `${big}\nmore`);
  assert.deepEqual(countChanges(lines), { added: 1001, removed: 1000 });
});
