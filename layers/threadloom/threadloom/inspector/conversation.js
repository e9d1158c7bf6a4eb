// The conversation root → leaf: loaded page by page, rendered chunk by chunk (only what is near the
// viewport is in the DOM; the feed's children are the message articles themselves), with a branch
// switcher at every message that has siblings and compaction overlays that expand to the original
// messages they replace.

import { api, describe } from "./api.js";
import { clear, fmtNumber, h } from "./dom.js";
import { COMPACTION_PREFIX, isOverlay, messageMeta, rawJson, renderParts } from "./messages.js";

const CHUNK = 40; // messages per rendered chunk
const PAGE = 200; // messages per history request (the API's maximum page)
const ESTIMATED_HEIGHT = 120; // px per message before anything was measured
const MARGIN = 800; // px above and below the viewport kept rendered

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
    this.busy = 0; // page loads in flight (the feed is aria-busy meanwhile)
    this.busyTarget = -1;
    this.loadTarget = -1;
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
    this.scroller.addEventListener("scroll", () => this.schedule(), { passive: true });
    // A click (originals shown or hidden), a raw JSON toggle or a loaded image may resize a message
    for (const type of ["click", "toggle", "load"]) this.scroller.addEventListener(type, () => this.schedule(), true);
    this.loadingNote = h("p", { class: "feed-loading muted small", hidden: true });
    this.root.append(
      h("div", { class: "conv-head" }, this.heading, h("div", { class: "row" }, this.topButton, this.endButton, this.latestButton, this.staleButton)),
      this.info,
      h("p", { class: "muted small hint" }, "Keys: J / K move between messages, Home / End jump, ‹ › switch branches."),
      this.error,
      h("div", { class: "feed-wrap" }, this.scroller, this.loadingNote),
    );
    this.resizeObserver = new ResizeObserver(() => this.schedule());
    this.resizeObserver.observe(this.scroller);
  }

  destroy() {
    this.generation++;
    this.resizeObserver.disconnect();
    if (this.frame) cancelAnimationFrame(this.frame);
    this.frame = 0;
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
    this.busy = 0; // loads of an earlier generation no longer count
    this.busyTarget = -1;
    this.loadTarget = -1;
    this.loadingNote.hidden = true;
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
    this.showBusy();
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
    if (this.leafId || !this.heights) return this.load({ scrollTo: "keep" });
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
    // The chunk of the old last message gained messages (and that message lost its badge): render
    // it again if it is in the feed; new chunks start with an estimated height
    const first = Math.max(0, Math.floor(oldLast / CHUNK));
    const count = this.heights.length;
    for (let i = count; i < this.chunkCount(); i++) this.heights.push(this.estimate(i));
    for (let i = first; i < count; i++) if (this.rendered.has(i)) this.rerenderChunk(i);
    for (const article of this.scroller.children) {
      const index = Number(article.dataset.index);
      article.setAttribute("aria-setsize", String(this.total));
      article.setAttribute("aria-label", this.articleLabel(this.messages[index], index));
    }
    this.setSpacers();
    this.describePath();
    if (atBottom) this.scrollToIndex(this.total - 1);
    else this.schedule();
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
  //
  // The feed's children are the rendered messages only (the WAI-ARIA feed pattern wants its articles
  // as direct children): one contiguous window of chunks near the viewport. The chunks before and
  // after the window are not in the DOM; their measured (or estimated) heights are the feed's
  // ::before and ::after spacers (CSS custom properties, so no element stands for them).

  averageHeight() {
    return this.measured.count ? this.measured.height / this.measured.count : ESTIMATED_HEIGHT;
  }

  chunkCount() {
    return Math.ceil(this.total / CHUNK);
  }

  /** The index of the last message of chunk `index`. */
  chunkEnd(index) {
    return Math.min(this.total, (index + 1) * CHUNK) - 1;
  }

  estimate(index) {
    return Math.round((this.chunkEnd(index) - index * CHUNK + 1) * this.averageHeight());
  }

  /** How many chunks, from the first, have all their messages loaded (all once no page is left). */
  loadedChunks() {
    if (!this.cursor || this.messages.length >= this.total) return this.chunkCount();
    return Math.floor(this.messages.length / CHUNK);
  }

  buildChunks() {
    clear(this.scroller);
    this.rendered = new Map(); // chunk index → its article elements, in the feed
    this.window = null; // { lo, hi }: the chunks in the feed
    this.heights = []; // px per chunk: measured once rendered, estimated before
    this.measuredChunks = new Set();
    for (let i = 0; i < this.chunkCount(); i++) this.heights.push(this.estimate(i));
    this.setSpacers();
    this.schedule();
  }

  setSpacers() {
    const { lo, hi } = this.window || { lo: this.heights.length, hi: this.heights.length };
    let before = 0;
    let after = 0;
    this.heights.forEach((height, i) => {
      if (i < lo) before += height;
      else if (i > hi) after += height;
    });
    this.scroller.style.setProperty("--space-before", `${Math.round(before)}px`);
    this.scroller.style.setProperty("--space-after", `${Math.round(after)}px`);
  }

  /** Read the heights of the rendered chunks from the layout (a message may have grown or shrunk). */
  measureWindow() {
    if (!this.window || !this.scroller.clientHeight) return;
    for (let i = this.window.lo; i <= this.window.hi; i++) {
      const els = this.rendered.get(i);
      if (!els || !els.length) continue;
      const next = this.rendered.get(i + 1);
      const last = els[els.length - 1];
      const bottom = next ? next[0].offsetTop : last.offsetTop + last.offsetHeight + (parseFloat(getComputedStyle(last).marginBottom) || 0);
      const height = bottom - els[0].offsetTop;
      if (!this.measuredChunks.has(i)) {
        this.measuredChunks.add(i);
        this.measured.height += height;
        this.measured.count += els.length;
      }
      this.heights[i] = height;
    }
  }

  /** The chunks within 800 px of the viewport, by their heights. */
  visibleRange() {
    const top = this.scroller.scrollTop - MARGIN;
    const bottom = this.scroller.scrollTop + this.scroller.clientHeight + MARGIN;
    let y = 0;
    let lo = -1;
    let hi = -1;
    for (let i = 0; i < this.heights.length && y <= bottom; i++) {
      const end = y + this.heights[i];
      if (end >= top) {
        if (lo < 0) lo = i;
        hi = i;
      }
      y = end;
    }
    if (lo < 0) lo = hi = this.heights.length - 1;
    return { lo, hi };
  }

  /** Update the window on the next frame (after a scroll, a resize, a click that may resize a message). */
  schedule() {
    if (this.frame) return;
    this.frame = requestAnimationFrame(() => {
      this.frame = 0;
      this.update();
    });
  }

  update() {
    if (!this.heights || !this.heights.length || !this.scroller.clientHeight) return;
    this.measureWindow();
    const { lo, hi } = this.visibleRange();
    const loaded = this.loadedChunks();
    if (lo < loaded) this.renderWindow(lo, Math.min(hi, loaded - 1));
    if (hi >= loaded) this.loadMore(this.chunkEnd(hi));
  }

  /** Render exactly chunks lo..hi: keep those already in the feed, drop the others, add the missing. */
  renderWindow(lo, hi) {
    if (this.window && this.window.lo === lo && this.window.hi === hi) return;
    this.measureWindow();
    for (const [i, els] of this.rendered) {
      if (i >= lo && i <= hi) continue;
      for (const el of els) el.remove();
      this.rendered.delete(i);
    }
    const kept = this.scroller.firstElementChild; // the first message still in the feed, or null
    const keptChunk = kept ? Math.floor(Number(kept.dataset.index) / CHUNK) : Infinity;
    for (let i = lo; i <= hi; i++) {
      if (this.rendered.has(i)) continue;
      const els = this.renderChunkMessages(i);
      this.rendered.set(i, els);
      if (i < keptChunk) for (const el of els) this.scroller.insertBefore(el, kept);
      else this.scroller.append(...els);
    }
    this.window = { lo, hi };
    this.setSpacers();
    this.measureWindow();
  }

  renderChunkMessages(index) {
    const els = [];
    for (let i = index * CHUNK; i <= this.chunkEnd(index); i++) els.push(this.renderMessage(this.messages[i], i));
    return els;
  }

  /** Render a chunk in the feed again (its messages changed), keeping the focus on the same message. */
  rerenderChunk(index) {
    const old = this.rendered.get(index);
    const focused = document.activeElement && old.some((el) => el.contains(document.activeElement)) ? document.activeElement.closest(".msg[data-index]") : null;
    const els = this.renderChunkMessages(index);
    for (const el of els) this.scroller.insertBefore(el, old[0]);
    for (const el of old) el.remove();
    this.rendered.set(index, els);
    if (focused) {
      const again = els.find((el) => el.dataset.index === focused.dataset.index);
      if (again) again.focus({ preventScroll: true });
    }
  }

  /** Load pages in the background up to message `end`, then update the window. */
  loadMore(end) {
    if (end <= this.loadTarget) return;
    this.loadTarget = end;
    const generation = this.generation;
    this.ensureLoaded(end).then(
      () => {
        if (generation === this.generation) this.schedule();
      },
      (error) => {
        if (generation !== this.generation) return;
        this.loadTarget = this.messages.length - 1; // a later scroll tries again
        this.setError(error);
      },
    );
  }

  /** The feed is busy (aria-busy, and a note over it) while pages load. */
  showBusy() {
    const busy = this.busy > 0;
    this.scroller.setAttribute("aria-busy", String(busy));
    this.loadingNote.hidden = !busy;
    if (busy) this.loadingNote.textContent = `Loading messages ${fmtNumber(this.messages.length + 1)}–${fmtNumber(Math.min(this.total, this.busyTarget + 1))}…`;
  }

  /** Follow history cursors until message `index` is loaded (one request in flight at a time). */
  async ensureLoaded(index) {
    const generation = this.generation;
    if (this.messages.length > index || !this.cursor) return;
    this.busy++;
    this.busyTarget = Math.max(this.busyTarget, index);
    this.showBusy();
    try {
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
          this.loading
            .finally(() => {
              this.loading = null;
            })
            .catch(() => {}); // the failure is handled where it is awaited
        }
        await this.loading;
        if (generation !== this.generation) return;
        this.showBusy();
      }
    } finally {
      if (generation === this.generation) {
        this.busy--;
        if (!this.busy) this.busyTarget = -1;
        this.showBusy();
      }
    }
  }

  async scrollToIndex(index, { focus = false, highlight = false, focusSwitcher = false } = {}) {
    if (index < 0 || !this.heights.length) return;
    const chunk = Math.floor(index / CHUNK);
    const generation = this.generation;
    try {
      await this.ensureLoaded(this.chunkEnd(chunk));
    } catch (error) {
      if (generation === this.generation) this.setError(error);
      return;
    }
    if (generation !== this.generation) return;
    if (!this.rendered.has(chunk)) {
      const { lo, hi } = this.window || { lo: chunk, hi: chunk };
      if (chunk >= lo - 1 && chunk <= hi + 1) this.renderWindow(Math.min(lo, chunk), Math.max(hi, chunk));
      else this.renderWindow(chunk, chunk); // far away: the window moves there
    }
    const el = this.rendered.get(chunk)[index - chunk * CHUNK];
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
    this.schedule();
  }

  onKey(event) {
    if (event.target.closest("input, textarea, select")) return;
    const current = event.target.closest(".msg[data-index]");
    const index = current ? Number(current.dataset.index) : -1;
    const plain = !(event.altKey || event.ctrlKey || event.metaKey || event.shiftKey);
    let next = null;
    if (event.key === "j" || (event.key === "ArrowDown" && event.altKey)) next = index + 1;
    else if (event.key === "k" || (event.key === "ArrowUp" && event.altKey)) next = Math.max(0, index - 1);
    // From the list or from anywhere in a message, as J / K: focus moves to the first or last message
    else if (event.key === "Home" && plain) next = 0;
    else if (event.key === "End" && plain) next = this.total - 1;
    if (next === null || next < 0 || next >= this.total) return;
    event.preventDefault();
    this.scrollToIndex(next, { focus: true });
  }

  // ------------------------------------------------------------------ one message

  renderMessage(message, index) {
    if (!message) return h("article", { class: "msg missing", tabindex: "-1", "aria-posinset": index + 1, "aria-setsize": this.total, dataset: { index: String(index) } }, `Message ${index + 1} is not loaded.`);
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
        "aria-label": this.articleLabel(message, index),
        dataset: { index: String(index), messageId: message.id },
      },
      h("header", { class: "msg-head" }, h("span", { class: "msg-pos muted small" }, `#${index + 1}`), ...messageMeta(message, overlay ? { createdAt: this.overlayStoredAt(message) } : {}), ...badges, this.branchSwitcher(message, index), this.messageActions(message)),
    );
    if (overlay) article.append(...this.renderOverlay(message));
    else article.append(h("div", { class: "msg-body" }, ...renderParts(message)));
    article.append(rawJson(message));
    return article;
  }

  articleLabel(message, index) {
    if (!message) return `Message ${index + 1} of ${this.total}, not loaded`;
    return `${isOverlay(message) ? "Compaction summary" : message.role} message ${index + 1} of ${this.total}`;
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
