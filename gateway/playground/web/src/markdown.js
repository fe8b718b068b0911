// Markdown rendering for text documents: marked for parsing, highlight.js for
// fenced code inside the text, DOMPurify so that nothing from a stream can
// run script in the page.
import DOMPurify from 'dompurify';
import { Marked } from 'marked';
import { escapeHTML, highlight, knownLanguage } from './highlight.js';

const marked = new Marked({
  gfm: true,
  breaks: false,
  async: false,
  renderer: {
    code({ text, lang }) {
      const language = (lang || '').trim().split(/\s+/)[0] || '';
      const cls = knownLanguage(language) ? ` class="hljs language-${escapeHTML(language)}"` : ' class="hljs"';
      return `<pre class="md-code"><code${cls}>${highlight(text, language)}</code></pre>\n`;
    },
    // a task list's box is a mark, not a form control (the sanitizer drops <input>)
    checkbox({ checked }) {
      return checked ? '<span class="task-box" role="img" aria-label="done">☑</span> ' : '<span class="task-box" role="img" aria-label="to do">☐</span> ';
    },
  },
});

DOMPurify.addHook('afterSanitizeAttributes', (node) => {
  if (node.tagName === 'A' && node.hasAttribute('href')) {
    node.setAttribute('target', '_blank');
    node.setAttribute('rel', 'noopener noreferrer');
  }
});

// The classes this renderer and highlight.js write: hljs, hljs-<scope>, the
// tiers of a scope (function_, inherited__), language-<name>, md-code and
// task-box. Any other class is dropped, so that markdown cannot dress up as
// the page's own UI (a "You" message, an error box, a status badge).
const OWN_CLASS = /^(?:hljs(?:-[\w-]+)?|[a-z][\w-]*_+|language-[\w+#.:-]+|md-code|task-box)$/;

DOMPurify.addHook('uponSanitizeAttribute', (node, data) => {
  if (data.attrName !== 'class') return;
  const kept = String(data.attrValue || '')
    .split(/\s+/)
    .filter((c) => OWN_CLASS.test(c));
  if (kept.length) data.attrValue = kept.join(' ');
  else data.keepAttr = false;
});

// Markdown from a stream may format text; it may not style the page, add
// form controls, carry data-* attributes (the page's own controls use them),
// ids (the page's own use them) or hidden text, or use the page's classes.
const SANITIZE = {
  ADD_ATTR: ['target'],
  FORBID_TAGS: ['style', 'form', 'input', 'button', 'textarea', 'select', 'option', 'optgroup', 'fieldset', 'label', 'datalist', 'output'],
  FORBID_ATTR: ['style', 'id', 'hidden'],
  ALLOW_DATA_ATTR: false,
};

/** Renders markdown to sanitized HTML. */
export function renderMarkdown(source) {
  const html = marked.parse(source == null ? '' : String(source));
  return DOMPurify.sanitize(html, SANITIZE);
}

/** Sanitizes an HTML string (used for highlighted code). */
export function sanitize(html) {
  return DOMPurify.sanitize(html, SANITIZE);
}
