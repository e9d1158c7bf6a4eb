// The context window: the estimate's breakdown against the threshold, every block with its usage
// (writable ones editable), loaded skills; and the frozen system prompt beside a fresh render.

import { api } from "./api.js";
import { diffView } from "./diff-view.js";
import { renderHistory } from "./history.js";
import { renderKnowledge } from "./knowledge.js";
import { append, clear, fmtNumber, h, usageBar } from "./dom.js";
import { busy, errorBox, notify, showError } from "./ui.js";

function kindTags(block) {
  const tags = [];
  tags.push(block.writable ? "writable" : "read-only");
  if (block.isSkill) tags.push("skills");
  if (block.isSearchable) tags.push("searchable");
  return tags.map((tag) => h("span", { class: `tag tag-${tag}` }, tag));
}

function breakdown(win) {
  const total = win.totalTokens;
  const scale = Math.max(win.threshold || 0, total, 1);
  const historyShare = (100 * win.historyTokens) / scale;
  const promptShare = (100 * win.systemPromptTokens) / scale;
  const bar = h(
    "div",
    { class: "stack", role: "img", "aria-label": `System prompt ${win.systemPromptTokens} tokens, history ${win.historyTokens} tokens${win.threshold ? `, threshold ${win.threshold}` : ""}` },
    h("span", { class: "seg seg-prompt", style: { width: `${promptShare.toFixed(2)}%` } }),
    h("span", { class: "seg seg-history", style: { width: `${historyShare.toFixed(2)}%` } }),
  );
  const rows = [
    ["System prompt (as the estimate sees it)", win.systemPromptTokens, "seg-prompt"],
    ...win.blocks.map((b) => [`of which block “${b.label}”`, b.tokens, "sub"]),
    [`History (${fmtNumber(win.historyMessages)} stored message${win.historyMessages === 1 ? "" : "s"} on the path, overlays applied)`, win.historyTokens, "seg-history"],
  ];
  const table = h(
    "table",
    { class: "breakdown" },
    h("caption", { class: "visually-hidden" }, "Estimated context, in tokens"),
    h("tbody", {}, ...rows.map(([label, tokens, swatch]) => h("tr", {}, h("th", { scope: "row", class: swatch === "sub" ? "sub" : null }, swatch && swatch !== "sub" ? h("span", { class: `swatch ${swatch}` }) : null, label), h("td", { class: "num" }, fmtNumber(tokens))))),
    h(
      "tfoot",
      {},
      h("tr", {}, h("th", { scope: "row" }, "Total estimate"), h("td", { class: "num", id: "context-total" }, fmtNumber(total))),
      h(
        "tr",
        {},
        h("th", { scope: "row" }, "Compaction threshold"),
        h("td", { class: "num" }, win.threshold ? `${fmtNumber(win.threshold)} (${Math.round((100 * total) / win.threshold)}% used)` : "off"),
      ),
    ),
  );
  return h("section", { class: "card", "aria-labelledby": "breakdown-title" }, h("h3", { id: "breakdown-title" }, "What the model will see"), bar, table, h("p", { class: "muted small" }, "Estimates use the same heuristic as automatic compaction (about 4 characters or 0.77 words per token)."));
}

function blockCard(block, ctx, error, reload, openPanels) {
  const card = h("section", { class: "card block", dataset: { label: block.label }, "aria-labelledby": `block-${block.label}` });
  const editable = block.writable && !block.isSkill && !block.isSearchable;
  // append() from dom.js skips null; Element.append would print it as the text "null".
  append(card, [
    h("div", { class: "block-head" }, h("h3", { id: `block-${block.label}` }, block.label), ...kindTags(block)),
    block.description ? h("p", { class: "muted small block-description" }, block.description) : null,
    usageBar(block.tokens, block.maxTokens, { label: block.label }),
    h("pre", { class: "block-content" }, block.content || "(empty)"),
    block.writable ? h("p", { class: "block-proposals notice-inline warn small", dataset: { label: block.label }, hidden: true }) : null,
  ]);
  if (block.isSearchable && block.writable) return withEntries(card, block, reload, openPanels);
  if (!editable) return card;
  const textarea = h("textarea", { name: "content", rows: 4, "aria-label": `New content for ${block.label}` }, block.content);
  const mode = h("select", { name: "mode", "aria-label": "How to write" }, h("option", { value: "replace" }, "Replace the content"), h("option", { value: "append" }, "Append to the content"));
  const save = h("button", { type: "submit", class: "primary" }, "Save");
  const form = h("form", { class: "block-edit", hidden: true }, textarea, h("div", { class: "row" }, mode, save, h("button", { type: "button", onClick: () => { form.hidden = true; editButton.hidden = false; } }, "Cancel")));
  const editButton = h("button", { type: "button", class: "edit-block" }, `Edit ${block.label}`);
  mode.addEventListener("change", () => {
    textarea.value = mode.value === "append" ? "" : block.content;
  });
  editButton.addEventListener("click", () => {
    form.hidden = false;
    editButton.hidden = true;
    textarea.focus();
  });
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    await busy(save, async () => {
      const updated = await api.writeBlock(ctx.sessionId, block.label, textarea.value, mode.value);
      notify(`Saved “${block.label}”: ${fmtNumber(updated.tokens)} tokens.`);
      showError(error, null);
      await reload();
    }, error);
  });
  // The history stays open across reloads (a revert reloads the panel), so it shows the new version.
  const history = togglePanel({
    id: `history-${block.label}`,
    kind: "history",
    buttonText: `History of ${block.label}`,
    openPanels,
    reload,
    render: (section, afterChange) => renderHistory(section, ctx, block, { onReverted: afterChange }),
  });
  card.append(h("div", { class: "row" }, editButton, history.button), form, history.section);
  history.restore();
  return card;
}

/** A knowledge block's card with a toggle for its entries (open across reloads, like a history). */
function withEntries(card, block, reload, openPanels) {
  const entries = togglePanel({
    id: `entries-${block.label}`,
    kind: "entries",
    buttonText: `Entries of ${block.label}`,
    openPanels,
    reload,
    render: (section, afterChange) => renderKnowledge(section, block, { onRemoved: afterChange }),
  });
  card.append(h("div", { class: "row" }, entries.button), entries.section);
  entries.restore();
  return card;
}

/**
 * A section under a block card that a button opens and closes, and that stays open when the panel
 * reloads (`openPanels` remembers it by `id`). `render(section, afterChange)` fills it; `afterChange`
 * reloads the panel and puts the focus back on the section's heading (`<id>-title`).
 */
function togglePanel({ id, kind, buttonText, openPanels, reload, render }) {
  const section = h("section", { class: `block-${kind}`, id, hidden: true });
  const button = h("button", { type: "button", class: `show-${kind}`, "aria-expanded": "false", "aria-controls": id }, buttonText);
  const show = (open) => {
    section.hidden = !open;
    button.setAttribute("aria-expanded", String(open));
    clear(section);
    if (open) {
      openPanels.add(id);
      render(section, async () => {
        await reload();
        document.getElementById(`${id}-title`)?.focus();
      });
    } else openPanels.delete(id);
  };
  button.addEventListener("click", () => show(section.hidden));
  return { button, section, restore: () => { if (openPanels.has(id)) show(true); } };
}

/** Fill the Context panel; returns its refresh function. */
export function renderContext(panel, ctx) {
  const error = errorBox();
  const body = h("div", { class: "stack-v" });
  const refreshButton = h("button", { type: "button" }, "Reload");
  const openPanels = new Set();
  panel.append(h("div", { class: "panel-head" }, h("h2", {}, "Context window"), refreshButton), error, body);

  async function reload() {
    try {
      const [win, { blocks }] = await Promise.all([api.contextWindow(ctx.sessionId), api.blocks(ctx.sessionId)]);
      showError(error, null);
      clear(body);
      body.append(breakdown(win));
      for (const block of blocks) body.append(blockCard(block, ctx, error, reload, openPanels));
      if (ctx.drawBlockNotes) ctx.drawBlockNotes(body);
      const skills = h("section", { class: "card", "aria-labelledby": "skills-title" }, h("h3", { id: "skills-title" }, "Loaded skills"));
      if (!win.loadedSkills.length) skills.append(h("p", { class: "muted" }, "None loaded. Load one with the load_context tool (Actions)."));
      const list = h("ul", { class: "skills" });
      for (const key of win.loadedSkills) {
        const [label, skill] = key.includes(":") ? key.split(":", 2) : ["skills", key];
        const unload = h("button", { type: "button", class: "link" }, "Unload");
        unload.addEventListener("click", () =>
          busy(unload, async () => {
            const { output } = await api.callTool(ctx.sessionId, "unload_context", { label, key: skill });
            notify(output);
            await reload();
          }, error),
        );
        list.append(h("li", {}, h("code", {}, key), " ", unload));
      }
      if (win.loadedSkills.length) skills.append(list);
      body.append(skills);
    } catch (caught) {
      showError(error, caught, "Could not load the context window");
    }
  }
  refreshButton.addEventListener("click", () => busy(refreshButton, reload));
  reload();
  return reload;
}

/** Fill the Prompt panel: frozen vs fresh with the differences, and a refresh button. */
export function renderPrompt(panel, ctx) {
  const error = errorBox();
  const body = h("div", { class: "stack-v" });
  const refreshButton = h("button", { type: "button", class: "primary", id: "refresh-prompt" }, "Refresh the frozen prompt");
  panel.append(
    h("div", { class: "panel-head" }, h("h2", {}, "System prompt"), refreshButton),
    h("p", { class: "muted small" }, "The frozen prompt is what the model is sent (cached); the fresh render shows the blocks as they are now. Refreshing replaces the frozen one."),
    error,
    body,
  );

  async function reload() {
    try {
      const win = await api.contextWindow(ctx.sessionId);
      showError(error, null);
      clear(body);
      if (win.frozenPrompt === null) {
        body.append(h("p", { class: "notice-inline", id: "prompt-state" }, "Not frozen yet: the first model call (or Refresh) freezes it. Fresh render:"), h("pre", { class: "prompt" }, win.freshPrompt));
        return;
      }
      const { list, changed } = diffView(win.frozenPrompt, win.freshPrompt, "Differences between the frozen prompt and a fresh render");
      append(body, [
        h(
          "p",
          { class: changed ? "notice-inline warn" : "notice-inline ok", id: "prompt-state" },
          changed ? `The frozen prompt is stale: ${changed} line${changed === 1 ? "" : "s"} differ from a fresh render.` : "The frozen prompt matches a fresh render.",
        ),
        changed ? h("section", { class: "card" }, h("h3", {}, "Differences (− frozen, + fresh)"), list) : null,
        h(
          "div",
          { class: "side-by-side" },
          h("section", { class: "card" }, h("h3", {}, "Frozen (sent to the model)"), h("pre", { class: "prompt", id: "frozen-prompt" }, win.frozenPrompt)),
          h("section", { class: "card" }, h("h3", {}, "Fresh render"), h("pre", { class: "prompt", id: "fresh-prompt" }, win.freshPrompt)),
        ),
      ]);
    } catch (caught) {
      showError(error, caught, "Could not load the system prompt");
    }
  }
  refreshButton.addEventListener("click", () =>
    busy(refreshButton, async () => {
      await api.refreshPrompt(ctx.sessionId);
      notify("The system prompt was re-rendered and frozen again.");
      if (ctx.promptRefreshed) ctx.promptRefreshed();
      await reload();
    }, error),
  );
  reload();
  return reload;
}
