// Syntax highlighting with highlight.js core and the handful of languages
// the playground registers. Unknown languages are shown as escaped text.
import hljs from 'highlight.js/lib/core';
import bash from 'highlight.js/lib/languages/bash';
import diff from 'highlight.js/lib/languages/diff';
import go from 'highlight.js/lib/languages/go';
import javascript from 'highlight.js/lib/languages/javascript';
import json from 'highlight.js/lib/languages/json';
import markdown from 'highlight.js/lib/languages/markdown';
import python from 'highlight.js/lib/languages/python';
import typescript from 'highlight.js/lib/languages/typescript';
import yaml from 'highlight.js/lib/languages/yaml';

hljs.registerLanguage('bash', bash);
hljs.registerLanguage('diff', diff);
hljs.registerLanguage('go', go);
hljs.registerLanguage('javascript', javascript);
hljs.registerLanguage('json', json);
hljs.registerLanguage('markdown', markdown);
hljs.registerLanguage('python', python);
hljs.registerLanguage('typescript', typescript);
hljs.registerLanguage('yaml', yaml);
hljs.registerAliases(['shell', 'console', 'shellsession', 'sh', 'zsh'], { languageName: 'bash' });
hljs.registerAliases(['patch', 'udiff'], { languageName: 'diff' });
hljs.registerAliases(['jsonl', 'ndjson', 'json5'], { languageName: 'json' });

/** Escapes text for use inside HTML. */
export function escapeHTML(text) {
  return String(text)
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;')
    .replace(/'/g, '&#39;');
}

/** Reports whether a language name or alias is registered. */
export function knownLanguage(language) {
  return Boolean(language) && Boolean(hljs.getLanguage(String(language).toLowerCase()));
}

// Longer code is shown as plain text: highlighting a megabyte takes seconds.
const HIGHLIGHT_MAX = 256 * 1024;

/**
 * Returns highlighted HTML for code in the given language, or the escaped
 * code when the language is unknown or empty, or the code is too long.
 */
export function highlight(code, language) {
  const text = code == null ? '' : String(code);
  const lang = language ? String(language).toLowerCase() : '';
  if (lang && text.length <= HIGHLIGHT_MAX && hljs.getLanguage(lang)) {
    try {
      return hljs.highlight(text, { language: lang, ignoreIllegals: true }).value;
    } catch {
      // fall through to plain text
    }
  }
  return escapeHTML(text);
}
