// The conversation root → leaf: loaded page by page, rendered chunk by chunk (only what is near the
// viewport is in the DOM), with a branch switcher at every message that has siblings and compaction
// overlays that expand to the original messages they replace.

import { api, describe } from "./api.js";
import { clear, fmtNumber, h } from "./dom.js";
import { COMPACTION_PREFIX, isOverlay, messageMeta, rawJson, renderParts } from "./messages.js";

const CHUNK = 40; // messages per rendered chunk
const PAGE = 200; // messages per history request (the API's maximum page)
const ESTIMATED_HEIGHT = 120; // px per message before anything was measured

/** The ids of the branch points on the path to `leafId`: one of their children has it as its latest leaf. */
function pointsOnPath(points, leafId) {
  return points.branchPoints
    .filter((point) => point.parentId !== null && point.children.some((child) => child.leafId === leafId))
    .map((point) => point.parentId);
}

export class Conversation {
  constructor(root, sessionId, { focusMessageId = null } = {}) {
    this.root = root;
    this.sessionId = sessionId;
    this.leafId = focusMessageId; // null: the latest leaf
    this.focusMessageId = focusMessageId;
    this.onForkRequest = null;
    this.expanded = new Map(); // overlay id → originals (or a pending promise)
    this.generation = 0;
    this.measured = { height: 0, count: 0 };
    this.build();
    this.load({ scrollTo: focusMessageId ? "focus" : "top" });
  }

  build() {
    this.heading = h("h2", { id: "conversation-title" }, "Conversation");
    this.info = h("p", { class: "conv-info muted", "aria-live": "polite" }, "Loading messages…");
    this.latestButton = h("button", { type: "button", hidden: true, onClick: () => this.showLatest() }, "Show the latest leaf");
    this.staleButton = h("button", { type: "button", hidden: true, class: "primary", onClick: () => this.showLatest() }, "New messages: reload");
    this.endButton = h("button", { type: "button", onClick: () => this.scrollToIndex(this.total - 1, { focus: true }) }, "Jump to the end");
    this.topButton = h("button", { type: "button", onClick: () => this.scrollToIndex(0, { focus: true }) }, "Jump to the start");
    this.error = h("div", { class: "error", role: "alert", hidden: true });
    this.scroller = h("div", {
      class: "history",
      role: "feed",
      tabindex: "0",
      "aria-labelledby": "conversation-title",
      "aria-busy": "true",
    });
    this.scroller.addEventListener("keydown", (event) => this.onKey(event));
    this.root.append(
      h("div", { class: "conv-head" }, this.heading, h("div", { class: "row" }, this.topButton, this.endButton, this.latestButton, this.staleButton)),
      this.info,
      h("p", { class: "muted small hint" }, "Keys: J / K move between messages, Home / End jump, ‹ › switch branches."),
      this.error,
      this.scroller,
    );
    this.observer = new IntersectionObserver((entries) => this.onIntersect(entries), {
      root: this.scroller,
      rootMargin: "800px 0px",
    });
  }

  destroy() {
    this.generation++;
    this.observer.disconnect();
  }

  setError(error) {
    clear(this.error);
    this.error.hidden = !error;
    if (error) this.error.append(h("strong", {}, "Could not load the conversation: "), describe(error));
  }

  /** (Re)load from the first page for the current leaf and rebuild the chunk skeleton. */
  async load({ scrollTo = "keep" } = {}) {
    const generation = ++this.generation;
    const previousTop = this.scroller.scrollTop;
    const atBottom = this.scroller.scrollTop + this.scroller.clientHeight >= this.scroller.scrollHeight - 40;
    this.scroller.setAttribute("aria-busy", "true");
    let first;
    let points;
    let compactions;
    let latest;
    try {
      [first, points, compactions, latest] = await Promise.all([
        api.history(this.sessionId, { leafId: this.leafId, limit: PAGE }),
        api.branchPoints(this.sessionId),
        api.compactions(this.sessionId),
        api.leaf(this.sessionId),
      ]);
    } catch (error) {
      if (generation !== this.generation) return;
      this.setError(error);
      this.info.textContent = "";
      this.scroller.setAttribute("aria-busy", "false");
      return;
    }
    if (generation !== this.generation) return;
    this.setError(null);
    this.messages = first.messages.slice();
    this.total = first.total;
    this.pathLeafId = first.leafId;
    this.cursor = first.nextCursor || null;
    this.latestLeafId = latest.message ? latest.message.id : null;
    this.branches = new Map();
    this.pointsOnPath = null; // set below: branch points of this path (see hiddenBranchPoints)
    for (const point of points.branchPoints) {
      point.children.forEach((child, index) => {
        this.branches.set(child.id, { parentId: point.parentId, index, siblings: point.children });
      });
    }
    this.compactions = new Map(compactions.compactions.map((c) => [c.id, c]));
    this.pointsOnPath = pointsOnPath(points, this.pathLeafId);
    this.loading = null;
    this.staleButton.hidden = true;
    this.buildChunks();
    this.describePath();
    this.scroller.setAttribute("aria-busy", "false");
    if (scrollTo === "focus" && this.focusMessageId) this.scrollToIndex(this.total - 1, { focus: true, highlight: true });
    else if (scrollTo === "end" || (scrollTo === "keep" && atBottom && this.total)) this.scrollToIndex(this.total - 1);
    else if (typeof scrollTo === "number") this.scrollToIndex(Math.min(scrollTo, this.total - 1), { focus: true, focusSwitcher: true });
    else if (scrollTo === "keep") this.scroller.scrollTop = previousTop;
  }

  /**
   * Live refresh. The common case, messages appended under the latest leaf, is followed cheaply:
   * walk down from the old leaf to the new one child by child and add only those messages.
   * Anything else (a new branch, a compaction, a delete) reloads from the first page, except in a
   * long session whose path is not fully loaded, where the reader gets a button instead of a
   * reload that would refetch every page on each change.
   */
  async refresh() {
    if (this.refreshing) {
      this.refreshAgain = true;
      return;
    }
    this.refreshing = true;
    try {
      do {
        this.refreshAgain = false;
        await this.refreshOnce();
      } while (this.refreshAgain);
    } finally {
      this.refreshing = false;
    }
  }

  async refreshOnce() {
    if (this.leafId || !this.chunks) return this.load({ scrollTo: "keep" });
    const generation = this.generation;
    let latest;
    let points;
    let compactions;
    try {
      [latest, points, compactions] = await Promise.all([
        api.leaf(this.sessionId),
        api.branchPoints(this.sessionId),
        api.compactions(this.sessionId),
      ]);
    } catch (error) {
      this.setError(error);
      return undefined;
    }
    if (generation !== this.generation) return undefined;
    const newLeaf = latest.message ? latest.message.id : null;
    const sameOverlays = compactions.compactions.length === this.compactions.size;
    if (newLeaf === this.latestLeafId && sameOverlays) return undefined;
    const fullyLoaded = this.messages.length === this.total;
    const added = fullyLoaded && sameOverlays && newLeaf ? await this.walkDown(this.pathLeafId, newLeaf, points) : null;
    if (generation !== this.generation) return undefined;
    if (added) return this.appendTail(added, newLeaf, points);
    if (this.total > 1000 && !fullyLoaded) {
      this.staleButton.hidden = false;
      return undefined;
    }
    return this.load({ scrollTo: "keep" });
  }

  /** The messages from `fromId` (exclusive) down to `toId`, or null when `toId` is not below it. */
  async walkDown(fromId, toId, points) {
    const leafOf = new Map();
    for (const point of points.branchPoints) for (const child of point.children) leafOf.set(child.id, child.leafId);
    const added = [];
    let current = fromId;
    for (let step = 0; step < 100 && current !== toId; step++) {
      const { messages } = await api.children(this.sessionId, current);
      const next = messages.length === 1 ? messages[0] : messages.find((m) => leafOf.get(m.id) === toId);
      if (!next) return null;
      added.push(next);
      current = next.id;
    }
    return current === toId ? added : null;
  }

  appendTail(added, newLeaf, points) {
    const atBottom = this.scroller.scrollTop + this.scroller.clientHeight >= this.scroller.scrollHeight - 40;
    const oldLast = this.total - 1;
    this.messages.push(...added);
    this.total += added.length;
    this.pathLeafId = newLeaf;
    this.latestLeafId = newLeaf;
    this.pointsOnPath = pointsOnPath(points, newLeaf); // branch points of this path (see hiddenBranchPoints)
    this.branches = new Map();
    for (const point of points.branchPoints) {
      point.children.forEach((child, index) => this.branches.set(child.id, { parentId: point.parentId, index, siblings: point.children }));
    }
    const first = Math.max(0, Math.floor(oldLast / CHUNK));
    for (let i = first; i < Math.ceil(this.total / CHUNK); i++) {
      const size = Math.min(CHUNK, this.total - i * CHUNK);
      let chunk = this.chunks[i];
      if (!chunk) {
        const el = h("div", { class: "chunk", dataset: { chunk: String(i) } });
        el.style.height = `${Math.round(size * this.averageHeight())}px`;
        chunk = { el, rendered: false, height: null, size };
        this.chunks.push(chunk);
        this.scroller.append(el);
        this.observer.observe(el);
      }
      chunk.size = size;
      if (chunk.rendered) {
        chunk.rendered = false;
        this.renderChunk(i);
      }
    }
    this.describePath();
    if (atBottom) this.scrollToIndex(this.total - 1);
  }

  showLatest() {
    this.leafId = null;
    this.focusMessageId = null;
    history.replaceState(null, "", `#/sessions/${encodeURIComponent(this.sessionId)}`);
    return this.load({ scrollTo: "end" });
  }

  describePath() {
    const latest = !this.leafId || this.pathLeafId === this.latestLeafId;
    this.latestButton.hidden = latest;
    const overlays = this.messages.filter(isOverlay).length;
    if (!this.total) {
      this.info.textContent = "No messages yet. Append one from the Actions panel.";
      return;
    }
    this.info.textContent =
      `${fmtNumber(this.total)} message${this.total === 1 ? "" : "s"} from the root to ` +
      (latest ? "the latest leaf" : `message ${this.pathLeafId} (not the latest leaf)`) +
      (this.branches.size ? `; the tree branches at ${new Set([...this.branches.values()].map((b) => b.parentId)).size} message(s) (the Tree tab shows every branch)` : "") +
      (overlays ? `; ${overlays} compaction summar${overlays === 1 ? "y" : "ies"} in the first page` : "") +
      this.hiddenBranchPoints() +
      ".";
  }

  /** Words for the branch points of this path that no message shows (inside a compaction summary). */
  hiddenBranchPoints() {
    if (!this.pointsOnPath || this.messages.length < this.total) return ""; // known once the path is read
    const shown = new Set(this.messages.map((message) => message.id));
    const hidden = this.pointsOnPath.filter((id) => !shown.has(id));
    if (!hidden.length) return "";
    return `; ${hidden.length === 1 ? "a branch point" : `${hidden.length} branch points`} (${hidden.join(", ")}) inside a compaction summary, so no switcher here: the Tree tab shows ${hidden.length === 1 ? "its" : "their"} branches`;
  }

  // ------------------------------------------------------------------ chunks (virtualized rendering)

  averageHeight() {
    return this.measured.count ? this.measured.height / this.measured.count : ESTIMATED_HEIGHT;
  }

  buildChunks() {
    this.observer.disconnect();
    clear(this.scroller);
    this.chunks = [];
    const count = Math.ceil(this.total / CHUNK);
    for (let i = 0; i < count; i++) {
      const size = Math.min(CHUNK, this.total - i * CHUNK);
      const el = h("div", { class: "chunk", dataset: { chunk: String(i) } });
      el.style.height = `${Math.round(size * this.averageHeight())}px`;
      this.chunks.push({ el, rendered: false, height: null, size });
      this.scroller.append(el);
      this.observer.observe(el);
    }
  }

  onIntersect(entries) {
    for (const entry of entries) {
      const index = Number(entry.target.dataset.chunk);
      const chunk = this.chunks[index];
      if (!chunk || chunk.el !== entry.target) continue;
      if (entry.isIntersecting) this.renderChunk(index);
      else this.releaseChunk(index);
    }
  }

  async renderChunk(index) {
    const chunk = this.chunks[index];
    if (chunk.rendered || chunk.pending) return;
    const generation = this.generation;
    const end = Math.min(this.total, (index + 1) * CHUNK) - 1;
    if (this.messages.length <= end) {
      chunk.pending = true;
      chunk.el.setAttribute("aria-busy", "true");
      if (!chunk.el.firstChild) chunk.el.append(h("p", { class: "chunk-loading muted" }, `Loading messages ${fmtNumber(index * CHUNK + 1)}–${fmtNumber(end + 1)}…`));
      try {
        await this.ensureLoaded(end);
      } catch (error) {
        if (generation === this.generation) this.setError(error);
        return;
      } finally {
        chunk.pending = false;
      }
      if (generation !== this.generation || this.chunks[index] !== chunk) return;
    }
    clear(chunk.el);
    chunk.el.removeAttribute("aria-busy");
    const start = index * CHUNK;
    for (let i = start; i <= end; i++) chunk.el.append(this.renderMessage(this.messages[i], i));
    chunk.el.style.height = "";
    chunk.rendered = true;
    const height = chunk.el.offsetHeight;
    if (chunk.height === null) {
      this.measured.height += height;
      this.measured.count += chunk.size;
    }
    chunk.height = height;
  }

  releaseChunk(index) {
    const chunk = this.chunks[index];
    if (!chunk.rendered) return;
    chunk.height = chunk.el.offsetHeight;
    chunk.el.style.height = `${chunk.height}px`;
    clear(chunk.el);
    chunk.rendered = false;
  }

  /** Follow history cursors until message `index` is loaded (one request in flight at a time). */
  async ensureLoaded(index) {
    const generation = this.generation;
    while (this.messages.length <= index && this.cursor) {
      if (!this.loading) {
        const cursor = this.cursor;
        this.loading = api.history(this.sessionId, { cursor, limit: PAGE }).then((page) => {
          if (generation !== this.generation) return;
          this.messages.push(...page.messages);
          this.cursor = page.nextCursor || null;
          this.info.dataset.loaded = String(this.messages.length);
          if (!this.cursor) this.describePath(); // the whole path is read: hidden branch points are known
        });
        this.loading.finally(() => {
          this.loading = null;
        });
      }
      await this.loading;
      if (generation !== this.generation) return;
    }
  }

  async scrollToIndex(index, { focus = false, highlight = false, focusSwitcher = false } = {}) {
    if (index < 0 || !this.chunks.length) return;
    const chunkIndex = Math.floor(index / CHUNK);
    const generation = this.generation;
    await this.renderChunk(chunkIndex);
    if (generation !== this.generation) return;
    const el = this.scroller.querySelector(`[data-index="${index}"]`);
    if (!el) return;
    // Scroll the feed only (scrollIntoView would scroll the whole page too).
    const offset = el.getBoundingClientRect().top - this.scroller.getBoundingClientRect().top;
    const slack = index === this.total - 1 ? this.scroller.clientHeight - el.offsetHeight - 8 : (this.scroller.clientHeight - el.offsetHeight) / 2;
    this.scroller.scrollTop += offset - Math.max(0, slack);
    if (highlight) el.classList.add("highlight");
    if (focusSwitcher) {
      const switcher = el.querySelector(".branch-switch button:not([disabled])");
      (switcher || el).focus({ preventScroll: true });
    } else if (focus) el.focus({ preventScroll: true });
  }

  onKey(event) {
    if (event.target.closest("input, textarea, select")) return;
    const current = event.target.closest(".msg[data-index]");
    const index = current ? Number(current.dataset.index) : -1;
    let next = null;
    if (event.key === "j" || (event.key === "ArrowDown" && event.altKey)) next = index + 1;
    else if (event.key === "k" || (event.key === "ArrowUp" && event.altKey)) next = Math.max(0, index - 1);
    else if (event.key === "Home" && event.target === this.scroller) next = 0;
    else if (event.key === "End" && event.target === this.scroller) next = this.total - 1;
    if (next === null || next >= this.total) return;
    event.preventDefault();
    this.scrollToIndex(next, { focus: true });
  }

  // ------------------------------------------------------------------ one message

  renderMessage(message, index) {
    if (!message) return h("div", { class: "msg missing" }, `Message ${index + 1} is not loaded.`);
    const overlay = isOverlay(message);
    const isLast = index === this.total - 1;
    const badges = [];
    if (message.id === this.latestLeafId) badges.push(h("span", { class: "badge badge-leaf", title: "The most recently inserted message without children" }, "latest leaf"));
    else if (isLast) badges.push(h("span", { class: "badge" }, "end of this branch"));
    const article = h(
      "article",
      {
        class: `msg role-${message.role}${overlay ? " overlay" : ""}`,
        id: `msg-${message.id}`,
        tabindex: "-1",
        "aria-posinset": index + 1,
        "aria-setsize": this.total,
        "aria-label": `${overlay ? "Compaction summary" : message.role} message ${index + 1} of ${this.total}`,
        dataset: { index: String(index), messageId: message.id },
      },
      h("header", { class: "msg-head" }, h("span", { class: "msg-pos muted small" }, `#${index + 1}`), ...messageMeta(message, overlay ? { createdAt: this.overlayStoredAt(message) } : {}), ...badges, this.branchSwitcher(message, index), this.messageActions(message)),
    );
    if (overlay) article.append(...this.renderOverlay(message));
    else article.append(h("div", { class: "msg-body" }, ...renderParts(message)));
    article.append(rawJson(message));
    return article;
  }

  /** When the overlay was stored (the summary message itself carries the time it was read), or null. */
  overlayStoredAt(message) {
    const stored = this.compactions.get(message.id.slice(COMPACTION_PREFIX.length));
    return stored ? stored.createdAt : null;
  }

  messageActions(message) {
    if (isOverlay(message) || !this.onForkRequest) return null;
    return h("button", { type: "button", class: "link small", onClick: () => this.onForkRequest(message.id), "aria-label": `Fork the session at message ${message.id}` }, "Fork here");
  }

  branchSwitcher(message, index) {
    const branch = this.branches.get(message.id);
    if (!branch) return null;
    const { index: position, siblings } = branch;
    const go = (target) => {
      this.leafId = siblings[target].leafId;
      this.focusMessageId = null;
      this.load({ scrollTo: index });
    };
    return h(
      "span",
      { class: "branch-switch", role: "group", "aria-label": `Branch ${position + 1} of ${siblings.length}` },
      h("button", { type: "button", "aria-label": "Previous branch", disabled: position === 0, onClick: () => go(position - 1) }, "‹"),
      h("span", { class: "branch-count" }, `${position + 1}/${siblings.length}`),
      h("button", { type: "button", "aria-label": "Next branch", disabled: position === siblings.length - 1, onClick: () => go(position + 1) }, "›"),
    );
  }

  renderOverlay(message) {
    const compactionId = message.id.slice(COMPACTION_PREFIX.length);
    const stored = this.compactions.get(compactionId);
    const range = stored
      ? h("p", { class: "overlay-range" }, "Replaces the messages from ", h("code", {}, stored.fromMessageId), " to ", h("code", {}, stored.toMessageId), " (the originals stay stored).")
      : h("p", { class: "overlay-range muted" }, "Compaction summary.");
    const body = h("div", { class: "msg-body" }, ...renderParts(message));
    const originals = h("div", { class: "originals", hidden: true });
    const toggle = h("button", { type: "button", "aria-expanded": "false", class: "expand-originals" }, "Show the original messages");
    const show = async () => {
      toggle.setAttribute("aria-expanded", "true");
      toggle.textContent = "Hide the original messages";
      originals.hidden = false;
      clear(originals).append(h("p", { class: "muted" }, "Loading the originals…"));
      let cached = this.expanded.get(message.id);
      if (!cached || cached instanceof Error) {
        cached = api.originals(this.sessionId, compactionId).then((r) => r.messages, (error) => error);
        this.expanded.set(message.id, cached);
      }
      const result = await cached;
      if (originals.hidden) return;
      clear(originals);
      if (result instanceof Error) {
        originals.append(h("p", { class: "error", role: "alert" }, `Could not load the originals: ${describe(result)}`));
        return;
      }
      this.expanded.set(message.id, Promise.resolve(result));
      originals.append(h("p", { class: "muted small" }, `${result.length} original message${result.length === 1 ? "" : "s"}:`));
      for (const original of result) {
        originals.append(h("article", { class: `msg original role-${original.role}`, dataset: { messageId: original.id } }, h("header", { class: "msg-head" }, ...messageMeta(original)), h("div", { class: "msg-body" }, ...renderParts(original)), rawJson(original)));
      }
    };
    toggle.addEventListener("click", () => {
      if (toggle.getAttribute("aria-expanded") === "true") {
        toggle.setAttribute("aria-expanded", "false");
        toggle.textContent = "Show the original messages";
        originals.hidden = true;
        this.expanded.set(`${message.id}:open`, false);
      } else {
        this.expanded.set(`${message.id}:open`, true);
        show();
      }
    });
    if (this.expanded.get(`${message.id}:open`)) queueMicrotask(show);
    return [h("p", { class: "overlay-title" }, "Compaction summary"), range, body, toggle, originals];
  }
}
