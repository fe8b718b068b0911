// Terminal output as plain text: the escape sequences a command writes for a
// terminal (colours, cursor moves, hyperlinks, titles) are dropped.

// ESC or its 8-bit form, then: a CSI sequence; an OSC, DCS, SOS, PM or APC
// string up to BEL or ST, or, unterminated, up to the end of its line (so that
// a cut sequence does not hide the rest of the output); or a two- or
// three-character escape.
const ESCAPES =
  /(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]|(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c\n]*(?:\x07|\x1b\\|\x9c)?|\x1b[ -/]*[0-~]?/g;

// C0 controls but \t, \n and \r; DEL; C1 controls.
const CONTROLS = /[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]/g;

/**
 * Returns text without terminal escape sequences and control characters
 * other than tab and newline. A carriage return inside a line goes back to
 * the line's start, as in a terminal, so progress updates show their last state.
 */
export function stripAnsi(text) {
  const s = String(text ?? '')
    .replace(ESCAPES, '')
    .replace(CONTROLS, '');
  if (!s.includes('\r')) return s;
  return s
    .split('\n')
    .map((line) => overwrite(line.replace(/\r+$/, '')))
    .join('\n');
}

function overwrite(line) {
  let out = '';
  for (const part of line.split('\r')) out = part + out.slice(part.length);
  return out;
}
