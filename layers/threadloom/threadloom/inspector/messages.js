// How one message reads: text, reasoning, tool calls with input and output, files, raw JSON on demand.

import { h, timeEl } from "./dom.js";
import { renderMarkdown } from "./markdown.js";

export const COMPACTION_PREFIX = "compaction_";
export const isOverlay = (message) => typeof message.id === "string" && message.id.startsWith(COMPACTION_PREFIX);

function json(value) {
  try {
    return JSON.stringify(value, null, 2);
  } catch {
    return String(value);
  }
}

function shortJson(value, max = 80) {
  let text;
  try {
    text = typeof value === "string" ? value : JSON.stringify(value);
  } catch {
    text = String(value);
  }
  if (text === undefined) return "";
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

const isToolPart = (type) => typeof type === "string" && (type.startsWith("tool-") || type === "dynamic-tool");

function renderPart(part) {
  if (!part || typeof part !== "object") return h("pre", { class: "part-unknown" }, json(part));
  const type = part.type;
  if (type === "text") return h("div", { class: "part-text markdown" }, renderMarkdown(part.text));
  if (type === "reasoning") {
    const text = String(part.text ?? part.reasoning ?? "");
    return h("details", { class: "part-reasoning" }, h("summary", {}, `Reasoning (${text.length} characters)`), h("div", { class: "part-text markdown" }, renderMarkdown(text)));
  }
  if (isToolPart(type)) {
    const name = type === "dynamic-tool" ? part.toolName || "tool" : type.slice(5);
    const output = part.output ?? part.result;
    const state = part.state ? ` · ${part.state}` : "";
    return h(
      "details",
      { class: "part-tool" },
      h(
        "summary",
        {},
        h("span", { class: "tool-name" }, `${name}`),
        h("code", { class: "tool-brief" }, `(${shortJson(part.input, 60)})`),
        output !== undefined ? h("span", { class: "tool-arrow" }, " → ", h("code", {}, shortJson(output, 60))) : null,
        h("span", { class: "muted small" }, state),
      ),
      h("div", { class: "tool-io" }, h("h4", {}, "Input"), h("pre", {}, json(part.input ?? null))),
      output !== undefined ? h("div", { class: "tool-io" }, h("h4", {}, "Output"), h("pre", {}, typeof output === "string" ? output : json(output))) : null,
      part.errorText ? h("p", { class: "error-text" }, `Error: ${part.errorText}`) : null,
    );
  }
  if (type === "file") {
    return h("div", { class: "part-file" }, "File: ", h("code", {}, part.filename || part.url?.slice(0, 60) || "unnamed"), part.mediaType ? ` (${part.mediaType})` : "");
  }
  if (type === "source-url") return h("div", { class: "part-file" }, "Source: ", h("code", {}, part.url || ""), part.title ? ` — ${part.title}` : "");
  if (type === "step-start") return h("hr", { class: "part-step", "aria-label": "New step" });
  return h("details", { class: "part-unknown" }, h("summary", {}, `Part of type “${type}”`), h("pre", {}, json(part)));
}

/** The parts of a message (no header), for the conversation and for overlay originals. */
export function renderParts(message) {
  const parts = Array.isArray(message.parts) ? message.parts : [];
  if (!parts.length) return [h("p", { class: "muted" }, "(no parts)")];
  return parts.map(renderPart);
}

/** The raw stored JSON, behind a disclosure. */
export const rawJson = (message) => h("details", { class: "raw" }, h("summary", {}, "Raw JSON"), h("pre", {}, json(message)));

/**
 * A compact header: role, id, time. `createdAt` overrides the message's own time: an overlay's
 * summary is stamped when it is read, so its card shows when the overlay was stored instead.
 */
export function messageMeta(message, { createdAt = message.createdAt } = {}) {
  return [
    h("span", { class: `role role-${message.role}` }, message.role),
    h("code", { class: "msg-id", title: "Message id" }, message.id),
    createdAt ? timeEl(createdAt) : null,
  ];
}
