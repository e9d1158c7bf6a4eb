// A searchable block's entries: what the model stored with set_context, shared by every session of
// the tenant, listed a page at a time, each removable (its search terms go with it).

import { api } from "./api.js";
import { fmtNumber, h, timeEl } from "./dom.js";
import { busy, confirmAction, errorBox, notify, pagedList } from "./ui.js";

/**
 * Fill `container` with the block's entries in key order; `onRemoved` runs after an entry was
 * removed (the panel reloads, so the block's count shows the change).
 */
export function renderKnowledge(container, block, { onRemoved }) {
  const error = errorBox();
  const headingId = `entries-${block.label}-title`;
  const list = h("ul", { class: "entries" });
  const more = h("button", { type: "button", class: "load-more-entries", hidden: true }, "Load more entries");
  const status = h("p", { class: "muted small", role: "status" }, "Loading the entries…");
  container.append(
    h("h4", { id: headingId, tabindex: "-1" }, `Entries of ${block.label}`),
    h("p", { class: "muted small" }, "Shared by every session of this tenant. Removing one takes it out of search; prompts frozen before keep their count until refreshed."),
    status,
    error,
    list,
    more,
  );
  container.setAttribute("aria-labelledby", headingId);

  function item(entry) {
    const remove = h("button", { type: "button", class: "remove-entry", "aria-label": `Remove ${entry.key} from ${block.label}` }, "Remove");
    remove.addEventListener("click", async () => {
      if (!(await confirmAction(`Remove “${entry.key}” from ${block.label}? Every session of this tenant stops finding it.`, "Remove"))) return;
      await busy(remove, async () => {
        await api.deleteKnowledgeEntry(block.label, entry.key);
        notify(`Removed “${entry.key}” from ${block.label}.`);
        await onRemoved();
      }, error);
    });
    return h(
      "li",
      { dataset: { key: entry.key } },
      h("article", { class: "entry" }, h("h5", {}, h("code", {}, entry.key)), h("p", { class: "small muted" }, "Updated ", timeEl(entry.updatedAt)), h("pre", { class: "entry-content" }, entry.content), remove),
    );
  }

  pagedList({
    list,
    more,
    status,
    error,
    fetchPage: async (cursor) => {
      const page = await api.knowledgeEntries(block.label, { cursor });
      return { items: page.entries, nextCursor: page.nextCursor };
    },
    render: item,
    describe: (count, moreRemain) =>
      count ? `${fmtNumber(count)} entr${count === 1 ? "y" : "ies"} shown, in key order${moreRemain ? "; more remain" : ""}.` : "No entries yet: the model adds them with set_context.",
    failure: "Could not load the entries",
  });
}
