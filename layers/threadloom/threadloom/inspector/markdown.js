// Markdown in messages and summaries: parsed by marked, then sanitized by DOMPurify into a DOM
// fragment (never assigned as HTML to the live page). Both are vendored files of this package.
//
// What survives is text formatting only: headings (moved below the page's own), lists, tables,
// code, quotes, emphasis and links to http(s) or mailto. Raw HTML in the text is shown as text, not parsed (parsing it, even in an
// inert document, makes the browser report every inline handler it refuses under the page's CSP);
// an image is shown as its description (the CSP allows no remote image, and one would be a
// tracking pixel). The sanitizer then keeps only the tags and attributes listed below and only
// http(s)/mailto/# links, which open in a new tab without a referrer.

import DOMPurify from "./vendor-purify.js";
import { Marked } from "./vendor-marked.js";

const ESCAPES = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };
const escapeHtml = (text) => String(text ?? "").replace(/[&<>"']/g, (char) => ESCAPES[char]);

const marked = new Marked({
  gfm: true,
  breaks: true,
  async: false,
  renderer: {
    html: (token) => escapeHtml(token.text),
    image: (token) => escapeHtml(`[image${token.text ? `: ${token.text}` : ""}]`),
  },
});

const ALLOWED_TAGS = [
  "a", "b", "blockquote", "br", "code", "del", "em", "h1", "h2", "h3", "h4", "h5", "h6", "hr", "i", "kbd",
  "li", "ol", "p", "pre", "s", "strong", "sub", "sup", "table", "tbody", "td", "tfoot", "th", "thead", "tr", "ul",
];
const ALLOWED_ATTR = ["href", "title", "align", "start", "colspan", "rowspan"];
const SAFE_URL = /^(?:https?:|mailto:|#)/i;

const purifier = DOMPurify(window);
purifier.addHook("afterSanitizeAttributes", (node) => {
  if (node.nodeName !== "A") return;
  const href = node.getAttribute("href") || "";
  if (!SAFE_URL.test(href.trim())) {
    node.removeAttribute("href");
    return;
  }
  if (!href.startsWith("#")) {
    node.setAttribute("target", "_blank");
    node.setAttribute("rel", "noopener noreferrer nofollow");
  }
});

const CONFIG = {
  ALLOWED_TAGS,
  ALLOWED_ATTR,
  ALLOWED_URI_REGEXP: SAFE_URL,
  ALLOW_DATA_ATTR: false,
  ALLOW_ARIA_ATTR: false,
  KEEP_CONTENT: true, // the text of a removed element stays, as text
  RETURN_DOM_FRAGMENT: true,
};

// A message sits under the page's h1 (the session) and h2 (the conversation, a panel): its own
// headings are moved HEADING_SHIFT levels down (`#` → h3, `##` → h4, … h6 at most) so they never
// outrank the page's, and keep their Markdown level as a class (`md-h1` …) for their size.
const HEADING_SHIFT = 2;

function shiftHeadings(fragment) {
  for (const heading of fragment.querySelectorAll("h1, h2, h3, h4, h5, h6")) {
    const level = Number(heading.tagName.slice(1));
    const shifted = document.createElement(`h${Math.min(6, level + HEADING_SHIFT)}`);
    shifted.className = `md-h${level}`;
    shifted.append(...heading.childNodes);
    heading.replaceWith(shifted);
  }
  return fragment;
}

/** A sanitized DOM fragment for Markdown `text`; plain text if anything fails. */
export function renderMarkdown(text) {
  const source = String(text ?? "");
  try {
    return shiftHeadings(purifier.sanitize(marked.parse(source), CONFIG));
  } catch (error) {
    console.warn("Markdown could not be rendered; showing the text as it is", error);
    return document.createTextNode(source);
  }
}
