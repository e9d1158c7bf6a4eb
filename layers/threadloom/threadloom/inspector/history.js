// A writable block's history: every version, who made it (with a link to the message behind a
// model's change), the line diff against the version before it, and a revert to any older one.

import { api } from "./api.js";
import { diffView } from "./diff-view.js";
import { fmtNumber, h, timeEl } from "./dom.js";
import { busy, errorBox, notify, pagedList } from "./ui.js";

const MAX_MESSAGE_LINKS = 3; // a reflection may name many messages: link the first few, count the rest

const SOURCE_WORDS = {
  tool: "Tool call",
  http: "HTTP request",
  import: "Import",
  reflection: "Reflection",
  operator: "Operator",
  library: "Library call",
};

/** A link to one message in the conversation view (the route scrolls to it and highlights it). */
export const messageLink = (sessionId, messageId) =>
  h("a", { href: `#/sessions/${encodeURIComponent(sessionId)}/messages/${encodeURIComponent(messageId)}`, class: "message-link" }, h("code", {}, messageId));

/** Who made a change, in words: "Tool call in this session after message m7", "HTTP request (req-1)". */
function who(change, currentSessionId) {
  const parts = [h("strong", { class: "change-source", dataset: { source: change.source } }, SOURCE_WORDS[change.source] || change.source)];
  if (change.sessionId) {
    const here = change.sessionId === currentSessionId;
    parts.push(" in ", here ? "this session" : h("a", { href: `#/sessions/${encodeURIComponent(change.sessionId)}` }, "session ", h("code", {}, change.sessionId)));
  }
  const ids = change.messageIds || [];
  if (change.sessionId && ids.length) {
    parts.push(change.source === "reflection" ? ", having read " : " after ", ids.length === 1 ? "message " : "messages ");
    ids.slice(0, MAX_MESSAGE_LINKS).forEach((id, index) => {
      if (index) parts.push(", ");
      parts.push(messageLink(change.sessionId, id));
    });
    if (ids.length > MAX_MESSAGE_LINKS) parts.push(` and ${fmtNumber(ids.length - MAX_MESSAGE_LINKS)} more`);
  } else if (ids.length) {
    parts.push(` after ${fmtNumber(ids.length)} message${ids.length === 1 ? "" : "s"}`);
  }
  if (change.requestId) parts.push(" (request ", h("code", {}, change.requestId), ")");
  if (change.note) parts.push(": ", h("q", {}, change.note));
  return parts;
}

/**
 * Fill `container` with the block's timeline, newest first. `block` is the block as the panel
 * read it (its `version` guards a revert); `onReverted` runs after a revert succeeded.
 */
export function renderHistory(container, ctx, block, { onReverted }) {
  const error = errorBox();
  const headingId = `history-${block.label}-title`;
  const list = h("ol", { class: "timeline" });
  const more = h("button", { type: "button", class: "load-older", hidden: true }, "Load older versions");
  const status = h("p", { class: "muted small", role: "status" }, "Loading the history…");
  container.append(h("h4", { id: headingId, tabindex: "-1" }, `History of ${block.label}`), status, error, list, more);
  container.setAttribute("aria-labelledby", headingId);

  function entry(item, index, versions, olderRemain) {
    const previous = versions[index + 1];
    const isCurrent = item.version === block.version;
    const title = h("h5", {}, `Version ${fmtNumber(item.version)}`, isCurrent ? h("span", { class: "tag tag-current" }, "current") : null);
    const facts = h(
      "p",
      { class: "version-facts small" },
      timeEl(item.createdAt),
      " · ",
      ...who(item.change, ctx.sessionId),
      " · ",
      h("span", { class: "version-size" }, `${fmtNumber(item.sizeBytes)} byte${item.sizeBytes === 1 ? "" : "s"}`),
    );
    const article = h("article", { class: "version", dataset: { version: String(item.version) } }, title, facts);
    if (previous || !olderRemain) {
      const before = previous ? previous.content : "";
      const label = previous ? `Changes from version ${previous.version} to ${item.version}` : `Content of version ${item.version}, the earliest kept`;
      const { list: diff, changed } = diffView(before, item.content, label);
      article.append(
        h("p", { class: "muted small" }, previous ? (changed ? `Against version ${fmtNumber(previous.version)}:` : `Same content as version ${fmtNumber(previous.version)}.`) : "The earliest kept version:"),
        changed ? diff : null,
      );
    } else {
      article.append(h("p", { class: "muted small" }, "Load older versions to see what this one changed."));
    }
    if (!isCurrent) {
      const revert = h("button", { type: "button", class: "revert", "aria-label": `Revert ${block.label} to version ${item.version}` }, `Revert to version ${fmtNumber(item.version)}`);
      revert.addEventListener("click", () =>
        busy(revert, async () => {
          const updated = await api.revertBlock(ctx.sessionId, block.label, item.version, block.version);
          notify(`Reverted “${block.label}” to version ${item.version}: now version ${updated.version}.`);
          await onReverted();
        }, error),
      );
      article.append(revert);
    }
    return h("li", {}, article);
  }

  pagedList({
    list,
    more,
    status,
    error,
    fetchPage: async (cursor) => {
      const page = await api.blockHistory(ctx.sessionId, block.label, { cursor });
      return { items: page.versions, nextCursor: page.nextCursor };
    },
    render: entry,
    describe: (count, olderRemain) =>
      count ? `${fmtNumber(count)} version${count === 1 ? "" : "s"} shown, newest first${olderRemain ? "; older ones remain" : ""}.` : "No stored versions yet: the first write makes version 1.",
    failure: "Could not load the history",
  });
}
