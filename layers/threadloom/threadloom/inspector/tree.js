// The whole tree of a session: the path to the latest leaf, and at every branch point the other
// branches, each a collapsible path of its own, loaded when opened and page by page (200 messages a
// request), so a session of thousands of messages costs a page per opened path.
//
// Built from the API's branch points (every message with more than one child, each child with the
// latest leaf under it) and history pages. A branch point P lies on the path to leaf L exactly when
// one of P's children has L as its latest leaf (L is the latest leaf under every message between P
// and L), so the branch points of a path are known before its messages are read: the ones no row
// shows yet are listed at the path's top with their branches, and once the whole path is read, the
// ones still not shown are inside a compaction summary (which the reader can open).

import { api, describe } from "./api.js";
import { clear, fmtNumber, h, timeEl } from "./dom.js";
import { COMPACTION_PREFIX, isOverlay } from "./messages.js";

const PAGE = 200;
const SNIPPET = 90;

function snippet(message) {
  const parts = Array.isArray(message.parts) ? message.parts : [];
  const textPart = parts.find((part) => part && part.type === "text" && part.text);
  if (textPart) {
    const line = String(textPart.text).replace(/\s+/g, " ").trim();
    return line.length > SNIPPET ? `${line.slice(0, SNIPPET - 1)}…` : line;
  }
  const tool = parts.find((part) => part && typeof part.type === "string" && part.type.startsWith("tool-"));
  return tool ? `tool ${tool.type.slice(5)}` : `${parts.length} part${parts.length === 1 ? "" : "s"}`;
}

const messageHref = (sessionId, messageId) =>
  `#/sessions/${encodeURIComponent(sessionId)}/messages/${encodeURIComponent(messageId)}`;

export class TreeView {
  constructor(panel, ctx) {
    this.panel = panel;
    this.sessionId = ctx.sessionId;
    this.error = h("div", { class: "error", role: "alert", hidden: true });
    this.summary = h("p", { class: "muted small", id: "tree-summary", "aria-live": "polite" }, "Loading the tree…");
    this.body = h("div", { class: "tree", id: "session-tree" });
    const reload = h("button", { type: "button" }, "Reload");
    reload.addEventListener("click", () => this.reload());
    this.staleButton = h("button", { type: "button", class: "primary", id: "tree-stale", hidden: true }, "The tree changed: reload");
    this.staleButton.addEventListener("click", () => this.reload());
    panel.append(
      h("div", { class: "panel-head" }, h("h2", {}, "Tree"), h("div", { class: "row" }, this.staleButton, reload)),
      h("p", { class: "muted small" }, "The path to the latest leaf; every branch point lists its other branches (open one to read it). Compaction summaries open to the messages they replace."),
      this.error,
      this.summary,
      this.body,
    );
    this.generation = 0;
    this.reload();
  }

  /** New messages or overlays arrived: offer a reload (doing it unasked would close what the reader opened). */
  markStale() {
    this.staleButton.hidden = false;
  }

  async reload() {
    const generation = ++this.generation;
    this.staleButton.hidden = true;
    try {
      const [points, compactions, latest] = await Promise.all([
        api.branchPoints(this.sessionId),
        api.compactions(this.sessionId),
        api.leaf(this.sessionId),
      ]);
      if (generation !== this.generation) return;
      this.error.hidden = true;
      this.points = new Map(points.branchPoints.map((point) => [point.parentId, point.children]));
      this.compactions = new Map(compactions.compactions.map((c) => [c.id, c]));
      this.latestLeafId = latest.message ? latest.message.id : null;
      clear(this.body);
      if (!this.latestLeafId) {
        this.summary.textContent = "No messages yet.";
        return;
      }
      const branchCount = 1 + [...this.points.values()].reduce((sum, children) => sum + children.length - 1, 0);
      this.summary.textContent =
        `${fmtNumber(branchCount)} branch${branchCount === 1 ? "" : "es"}` +
        (this.points.size ? `, branching at ${fmtNumber(this.points.size)} message${this.points.size === 1 ? "" : "s"}` : "") +
        `; latest leaf ${this.latestLeafId}` +
        (this.compactions.size ? `; ${fmtNumber(this.compactions.size)} compaction summar${this.compactions.size === 1 ? "y" : "ies"}` : "") +
        ".";
      const roots = this.points.get(null);
      if (roots) {
        // Several roots: each is a branch of its own, the latest one open.
        roots.forEach((root, index) => this.body.append(this.pathNode(root.leafId, { after: null, title: `Root ${index + 1} of ${roots.length}: ${root.id}`, open: root.leafId === this.latestLeafId })));
      } else {
        this.body.append(this.pathNode(this.latestLeafId, { after: null, title: "Path to the latest leaf", open: true }));
      }
    } catch (caught) {
      if (generation !== this.generation) return;
      this.summary.textContent = "";
      clear(this.error).append(h("strong", {}, "Could not load the tree: "), describe(caught));
      this.error.hidden = false;
    }
  }

  /** Branch points whose branch towards `leafId` continues this path: {pointId: [other children]}. */
  pointsOn(leafId) {
    const on = new Map();
    for (const [parentId, children] of this.points) {
      if (parentId === null) continue;
      if (children.some((child) => child.leafId === leafId)) on.set(parentId, children);
    }
    return on;
  }

  /**
   * One path, from after message `after` (or the root) down to `leafId`, as a collapsible list.
   * Its messages load when it is first opened, a page at a time.
   */
  pathNode(leafId, { after, title, open = false }) {
    const list = h("ol", { class: "tree-path" });
    const more = h("button", { type: "button", class: "link tree-more", hidden: true }, "Load more");
    const status = h("p", { class: "muted small tree-status" });
    const hidden = h("div", { class: "tree-unseen" });
    const node = h(
      "details",
      { class: "tree-node", dataset: { leafId }, open },
      h("summary", {}, h("span", { class: "tree-title" }, title), " ", h("span", { class: "muted small" }, `→ leaf ${leafId}`), leafId === this.latestLeafId ? h("span", { class: "badge badge-leaf" }, "latest leaf") : null),
      hidden,
      list,
      status,
      more,
    );
    const state = { cursor: null, started: after === null, shown: new Set(), loaded: false, count: 0, skipped: [] };
    const onPath = this.pointsOn(leafId);
    onPath.delete(after); // where this branch leaves its parent path

    const loadPage = async () => {
      more.hidden = true;
      status.textContent = "Loading…";
      try {
        // Skip the shared prefix (up to the branch point) page by page; then show one page.
        let shownThisCall = 0;
        do {
          const page = await api.history(this.sessionId, state.cursor ? { cursor: state.cursor, limit: PAGE } : { leafId, limit: PAGE });
          state.cursor = page.nextCursor || null;
          for (const message of page.messages) {
            if (!state.started) {
              const overlay = isOverlay(message) ? this.compactions.get(message.id.slice(COMPACTION_PREFIX.length)) : null;
              if (message.id === after || (overlay && overlay.toMessageId === after)) {
                state.started = true;
                state.skipped = [];
              } else state.skipped.push(message);
              continue;
            }
            list.append(this.row(message, onPath, leafId));
            state.shown.add(message.id);
            shownThisCall++;
            state.count++;
          }
        } while (state.cursor && (!state.started || shownThisCall === 0));
        if (!state.started) {
          // The branch point is inside a compaction summary that this branch's path reads through
          // (the summarized range runs past it into this branch): show the whole path instead.
          state.started = true;
          for (const message of state.skipped) {
            list.append(this.row(message, onPath, leafId));
            state.shown.add(message.id);
            state.count++;
          }
          state.skipped = [];
          list.before(h("p", { class: "notice-inline small warn" }, `${after} is inside a compaction summary on this path: the whole path is shown.`));
        }
        status.textContent = state.cursor ? `${fmtNumber(state.count)} messages shown; more follow.` : `${fmtNumber(state.count)} message${state.count === 1 ? "" : "s"} on this branch.`;
        more.hidden = !state.cursor;
        this.showUnseen(hidden, onPath, state.shown, !state.cursor, leafId);
      } catch (caught) {
        status.textContent = `Could not load this branch: ${describe(caught)}`;
        status.classList.add("error-text");
        more.hidden = !state.cursor;
      }
    };
    more.addEventListener("click", loadPage);
    const first = () => {
      if (!node.open || state.loaded) return;
      state.loaded = true;
      loadPage();
    };
    node.addEventListener("toggle", first);
    if (open) queueMicrotask(first);
    this.showUnseen(hidden, onPath, state.shown, false, leafId);
    return node;
  }

  /**
   * The branch points of a path that no shown row carries, with their branches: further down (not
   * read yet) or, once the whole path is read, inside a compaction summary.
   */
  showUnseen(box, onPath, shown, complete, leafId) {
    const unseen = [...onPath.keys()].filter((id) => !shown.has(id));
    if (unseen.map((id) => `${id}|${complete}`).join(",") === box.dataset.showing) return; // opened branches stay open
    box.dataset.showing = unseen.map((id) => `${id}|${complete}`).join(",");
    clear(box);
    if (!unseen.length) return;
    const many = unseen.length > 1;
    const where = complete
      ? `inside a compaction summary (the summary stands in for ${many ? "them" : "it"}; open it to see the original messages)`
      : "further down this path, or inside a compaction summary";
    box.append(h("p", { class: `tree-unseen-note notice-inline small${complete ? " warn" : ""}` }, `Branch point${many ? "s" : ""} ${unseen.join(", ")}: ${where}. Other branches:`));
    for (const id of unseen) box.append(this.branchesAt(id, onPath.get(id), leafId));
  }

  /** The other children of branch point `pointId` (those not continuing towards `leafId`), each a closed path. */
  branchesAt(pointId, children, leafId) {
    const others = children.map((child, index) => ({ child, index })).filter(({ child }) => child.leafId !== leafId);
    return h(
      "div",
      { class: "tree-branches", dataset: { branchPoint: pointId } },
      others.map(({ child, index }) =>
        this.pathNode(child.leafId, { after: pointId, title: `Branch ${index + 1}/${children.length} at ${pointId}: ${child.id}` }),
      ),
    );
  }

  row(message, onPath, leafId) {
    const overlay = isOverlay(message);
    const item = h("li", { class: `tree-row role-${message.role}${overlay ? " tree-overlay" : ""}`, dataset: { messageId: message.id } });
    const head = h(
      "div",
      { class: "tree-line" },
      h("span", { class: `role role-${message.role}` }, overlay ? "summary" : message.role),
      " ",
      h("a", { href: messageHref(this.sessionId, message.id), class: "tree-id", title: "Show in the conversation" }, message.id),
      " ",
      h("span", { class: "tree-snippet" }, overlay ? "" : snippet(message)),
      message.id === this.latestLeafId ? h("span", { class: "badge badge-leaf" }, "latest leaf") : null,
      onPath.has(message.id) ? h("span", { class: "badge" }, `branches: ${onPath.get(message.id).length}`) : null,
    );
    item.append(head);
    if (overlay) item.append(this.overlayBody(message, onPath, leafId));
    if (onPath.has(message.id)) item.append(this.branchesAt(message.id, onPath.get(message.id), leafId));
    return item;
  }

  overlayBody(message, onPath, leafId) {
    const compactionId = message.id.slice(COMPACTION_PREFIX.length);
    const stored = this.compactions.get(compactionId);
    const originals = h("ol", { class: "tree-path tree-originals" });
    const details = h(
      "details",
      { class: "tree-node tree-overlay-node" },
      h("summary", {}, stored ? ["Replaces ", h("code", {}, stored.fromMessageId), " … ", h("code", {}, stored.toMessageId), stored.createdAt ? [" · stored ", timeEl(stored.createdAt)] : null] : "Compaction summary"),
      originals,
    );
    let loaded = false;
    details.addEventListener("toggle", async () => {
      if (!details.open || loaded) return;
      loaded = true;
      originals.append(h("li", { class: "muted small" }, "Loading the originals…"));
      try {
        const { messages } = await api.originals(this.sessionId, compactionId);
        clear(originals);
        for (const original of messages) originals.append(this.row(original, onPath, leafId));
      } catch (caught) {
        clear(originals).append(h("li", { class: "error-text" }, `Could not load the originals: ${describe(caught)}`));
      }
    });
    return details;
  }
}
