// Line diffs for file_edit documents: parsing a unified diff, or building one
// from an old and a new string. Pure functions, no DOM.

/**
 * @typedef {{kind: 'meta'|'hunk'|'add'|'del'|'ctx', text: string, oldNo: number|null, newNo: number|null}} DiffLine
 */

function splitLines(text) {
  if (text == null || text === '') return [];
  const lines = String(text).split('\n');
  if (lines.length > 1 && lines[lines.length - 1] === '') lines.pop();
  return lines;
}

/**
 * Parses a unified diff into typed lines with old and new line numbers.
 * @param {string} text
 * @returns {DiffLine[]}
 */
export function parseUnifiedDiff(text) {
  const out = [];
  let oldNo = 0;
  let newNo = 0;
  let inHunk = false;
  for (const line of splitLines(text)) {
    const hunk = /^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@/.exec(line);
    if (hunk) {
      oldNo = Number(hunk[1]);
      newNo = Number(hunk[2]);
      inHunk = true;
      out.push({ kind: 'hunk', text: line, oldNo: null, newNo: null });
    } else if (!inHunk || line.startsWith('--- ') || line.startsWith('+++ ') || line.startsWith('diff ') || line.startsWith('index ')) {
      out.push({ kind: 'meta', text: line, oldNo: null, newNo: null });
    } else if (line.startsWith('+')) {
      out.push({ kind: 'add', text: line.slice(1), oldNo: null, newNo: newNo++ });
    } else if (line.startsWith('-')) {
      out.push({ kind: 'del', text: line.slice(1), oldNo: oldNo++, newNo: null });
    } else if (line.startsWith('\\')) {
      out.push({ kind: 'meta', text: line, oldNo: null, newNo: null });
    } else {
      out.push({ kind: 'ctx', text: line.startsWith(' ') ? line.slice(1) : line, oldNo: oldNo++, newNo: newNo++ });
    }
  }
  return out;
}

const MAX_CELLS = 400_000;

/**
 * Builds a line diff of oldText → newText. Common lines become context, the
 * rest removals and additions (longest common subsequence). Very large inputs
 * fall back to "all removed, all added".
 * @param {string} oldText
 * @param {string} newText
 * @param {number} [startLine] line number of the first old line (1 when unknown)
 * @returns {DiffLine[]}
 */
export function diffLines(oldText, newText, startLine = 1) {
  const a = splitLines(oldText);
  const b = splitLines(newText);
  const first = Number.isFinite(startLine) && startLine > 0 ? startLine : 1;
  const out = [];
  out.push({ kind: 'hunk', text: `@@ -${first},${a.length} +${first},${b.length} @@`, oldNo: null, newNo: null });
  let oldNo = first;
  let newNo = first;
  if (a.length * b.length > MAX_CELLS) {
    for (const line of a) out.push({ kind: 'del', text: line, oldNo: oldNo++, newNo: null });
    for (const line of b) out.push({ kind: 'add', text: line, oldNo: null, newNo: newNo++ });
    return out;
  }
  // lcs[i][j] = length of the LCS of a[i:] and b[j:]
  const n = a.length;
  const m = b.length;
  const lcs = Array.from({ length: n + 1 }, () => new Uint32Array(m + 1));
  for (let i = n - 1; i >= 0; i--) {
    for (let j = m - 1; j >= 0; j--) {
      lcs[i][j] = a[i] === b[j] ? lcs[i + 1][j + 1] + 1 : Math.max(lcs[i + 1][j], lcs[i][j + 1]);
    }
  }
  let i = 0;
  let j = 0;
  while (i < n || j < m) {
    if (i < n && j < m && a[i] === b[j]) {
      out.push({ kind: 'ctx', text: a[i], oldNo: oldNo++, newNo: newNo++ });
      i++;
      j++;
    } else if (i < n && (j >= m || lcs[i + 1][j] >= lcs[i][j + 1])) {
      out.push({ kind: 'del', text: a[i], oldNo: oldNo++, newNo: null });
      i++;
    } else {
      out.push({ kind: 'add', text: b[j], oldNo: null, newNo: newNo++ });
      j++;
    }
  }
  return out;
}

/** Counts added and removed lines of a diff. */
export function countChanges(lines) {
  let added = 0;
  let removed = 0;
  for (const l of lines) {
    if (l.kind === 'add') added++;
    else if (l.kind === 'del') removed++;
  }
  return { added, removed };
}
