// Tiny DOM helpers: build elements without innerHTML (all text goes through textContent).

/**
 * Create an element. `attrs` keys: `class`, `text`, `on<Event>` handlers, `dataset`, booleans
 * (true sets the attribute, false/null/undefined skips it), `style` as an object, anything else as an attribute.
 */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") el.className = value;
    else if (key === "text") el.textContent = value;
    else if (key === "dataset") Object.assign(el.dataset, value);
    else if (key === "style") Object.assign(el.style, value); // CSSOM: allowed by the page's CSP
    else if (key.startsWith("on") && typeof value === "function") el.addEventListener(key.slice(2).toLowerCase(), value);
    else if (key === "value") el.value = value;
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  append(el, children);
  return el;
}

export function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

export function clear(el) {
  while (el.firstChild) el.removeChild(el.firstChild);
  return el;
}

const numberFormat = new Intl.NumberFormat("en");
export const fmtNumber = (n) => numberFormat.format(Number(n) || 0);
export const fmtCost = (n) => `$${(Number(n) || 0).toFixed(4)}`;

/** True when a client posted usage for the session (the API keeps zeros until one does). */
export const usageKnown = (session) =>
  Number(session.inputTokens) > 0 || Number(session.outputTokens) > 0 || Number(session.estimatedCost) > 0;

const NOT_REPORTED_TITLE = "No client posted usage for this session (POST /sessions/{id}/usage), so it is unknown, not zero.";

/** Tokens as a number, or "not reported" when no usage was posted (unknown is not 0). */
export function tokensOrUnknown(session, value) {
  if (!usageKnown(session)) return h("span", { class: "unknown muted", title: NOT_REPORTED_TITLE }, "unknown");
  return fmtNumber(value);
}

/** The cost, or "not reported" when none was posted (tokens alone carry no price). */
export function costOrUnknown(session) {
  if (!(Number(session.estimatedCost) > 0)) {
    const title = usageKnown(session) ? "Usage was posted without a cost: the price is unknown." : NOT_REPORTED_TITLE;
    return h("span", { class: "unknown muted", title }, "unknown");
  }
  return fmtCost(session.estimatedCost);
}

export function fmtDate(iso) {
  if (!iso) return "";
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return String(iso);
  return date.toLocaleString("en", { dateStyle: "medium", timeStyle: "short" });
}

/** A <time> element with the ISO value kept machine-readable. */
export const timeEl = (iso) => h("time", { datetime: iso || "", title: iso || "" }, fmtDate(iso));

/** A usage bar: <meter> for semantics plus a label in words. */
export function usageBar(used, max, { label = "", high = 0.8 } = {}) {
  const ratio = max ? used / max : 0;
  const percent = max ? Math.round(ratio * 100) : null;
  const words = max ? `${fmtNumber(used)} / ${fmtNumber(max)} tokens (${percent}%)` : `${fmtNumber(used)} tokens`;
  return h(
    "div",
    { class: "usage" },
    max
      ? h("meter", {
          min: 0,
          max,
          value: Math.min(used, max),
          low: Math.round(max * 0.6),
          high: Math.round(max * high),
          optimum: 0,
          "aria-label": label ? `${label} usage` : "usage",
        })
      : null,
    h("span", { class: "usage-text" }, words),
  );
}

/** Debounce a function (search-as-you-type, resize). */
export function debounce(fn, ms) {
  let timer = 0;
  return (...args) => {
    clearTimeout(timer);
    timer = setTimeout(() => fn(...args), ms);
  };
}
