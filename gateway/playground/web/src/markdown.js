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
  },
});

DOMPurify.addHook('afterSanitizeAttributes', (node) => {
  if (node.tagName === 'A' && node.hasAttribute('href')) {
    node.setAttribute('target', '_blank');
    node.setAttribute('rel', 'noopener noreferrer');
  }
});

/** Renders markdown to sanitized HTML. */
export function renderMarkdown(source) {
  const html = marked.parse(source == null ? '' : String(source));
  return DOMPurify.sanitize(html, { ADD_ATTR: ['target'] });
}

/** Sanitizes an HTML string (used for highlighted code). */
export function sanitize(html) {
  return DOMPurify.sanitize(html);
}
