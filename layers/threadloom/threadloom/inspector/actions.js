// Steering a session: append a message, fork, compact now, compact-and-split, call a model tool.

import { api } from "./api.js";
import { clear, h } from "./dom.js";
import { schemaForm } from "./schema-form.js";
import { busy, errorBox, notify, showError } from "./ui.js";

function newMessageId() {
  if (crypto.randomUUID) return crypto.randomUUID();
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

function card(title, id, ...children) {
  return h("section", { class: "card", "aria-labelledby": id }, h("h3", { id }, title), ...children);
}

function appendCard(ctx) {
  const error = errorBox();
  const role = h("select", { id: "append-role", name: "role" }, ...["user", "assistant", "system"].map((r) => h("option", { value: r }, r)));
  const text = h("textarea", { id: "append-text", name: "text", rows: 3, required: true });
  const parent = h("input", { id: "append-parent", name: "parentId", placeholder: "latest leaf", autocomplete: "off" });
  const submit = h("button", { type: "submit", class: "primary" }, "Append");
  const form = h(
    "form",
    {},
    h("div", { class: "field" }, h("label", { for: "append-role" }, "Role"), role),
    h("div", { class: "field" }, h("label", { for: "append-text" }, "Text"), text),
    h("div", { class: "field" }, h("label", { for: "append-parent" }, "Parent message id (empty: the latest leaf)"), parent),
    error,
    submit,
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    await busy(submit, async () => {
      const message = { id: newMessageId(), role: role.value, parts: [{ type: "text", text: text.value }] };
      const result = await api.append(ctx.sessionId, message, parent.value.trim() || undefined);
      showError(error, null);
      text.value = "";
      notify(`Appended message ${result.id}.`);
      if (parent.value.trim()) ctx.conversation.leafId = result.id;
      await ctx.conversation.load({ scrollTo: "end" });
      ctx.refreshContext();
    }, error);
  });
  return card("Append a message", "append-title", form);
}

function forkCard(ctx, panel) {
  const error = errorBox();
  const at = h("input", { id: "fork-at", name: "atMessageId", required: true, autocomplete: "off", placeholder: "message id" });
  const name = h("input", { id: "fork-name", name: "name", placeholder: "Name of the fork" });
  const submit = h("button", { type: "submit", class: "primary" }, "Fork");
  const result = h("p", { "aria-live": "polite" });
  const form = h(
    "form",
    {},
    h("p", { class: "muted small" }, "Copies the path from the root to this message into a new session (or use “Fork here” on a message)."),
    h("div", { class: "field" }, h("label", { for: "fork-at" }, "At message"), at),
    h("div", { class: "field" }, h("label", { for: "fork-name" }, "Name"), name),
    error,
    submit,
    result,
  );
  panel.addEventListener("fork-at", (event) => {
    at.value = event.detail;
    at.scrollIntoView({ block: "center" });
    name.focus();
  });
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    await busy(submit, async () => {
      const fork = await api.fork(ctx.sessionId, at.value.trim(), name.value.trim());
      showError(error, null);
      clear(result).append("Created ", h("a", { href: `#/sessions/${encodeURIComponent(fork.id)}` }, fork.name || fork.id), ".");
    }, error);
  });
  return card("Fork at a message", "fork-title", form);
}

const COMPACT_WORDS = {
  queued: "Compaction was queued; the meter shows when it is done.",
  compacted: "Compacted: the summary now stands in for the older messages.",
  nothing_to_compact: "Nothing to compact: the conversation is within its protected head and tail.",
};

function compactCard(ctx) {
  const error = errorBox();
  const button = h("button", { type: "button", class: "primary", id: "compact-now" }, "Compact now");
  const result = h("p", { "aria-live": "polite", id: "compact-result" });
  button.addEventListener("click", () =>
    busy(button, async () => {
      const out = await api.compact(ctx.sessionId);
      showError(error, null);
      result.textContent = COMPACT_WORDS[out.status] || `Compaction: ${out.status}`;
      await ctx.conversation.refresh();
    }, error),
  );
  return card("Compact now", "compact-title", h("p", { class: "muted small" }, "Summarizes the middle of the conversation; the originals stay stored and can be expanded."), error, button, result);
}

function splitCard(ctx) {
  const error = errorBox();
  const summary = h("textarea", { id: "split-summary", required: true, rows: 3 });
  const name = h("input", { id: "split-name", placeholder: "Name of the new session" });
  const submit = h("button", { type: "submit", class: "danger" }, "End and continue in a new session");
  const result = h("p", { "aria-live": "polite" });
  const form = h(
    "form",
    {},
    h("p", { class: "muted small" }, "Ends this session and starts a new one seeded with your summary."),
    h("div", { class: "field" }, h("label", { for: "split-summary" }, "Summary"), summary),
    h("div", { class: "field" }, h("label", { for: "split-name" }, "Name"), name),
    error,
    submit,
    result,
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    await busy(submit, async () => {
      const next = await api.split(ctx.sessionId, summary.value, name.value.trim() || undefined);
      showError(error, null);
      clear(result).append("Continued in ", h("a", { href: `#/sessions/${encodeURIComponent(next.id)}` }, next.name || next.id), ".");
      ctx.refreshSession();
    }, error);
  });
  return card("Compact and split", "split-title", form);
}

function toolCard(ctx) {
  const error = errorBox();
  error.id = "tool-error";
  const select = h("select", { id: "tool-name", "aria-label": "Tool" });
  const description = h("p", { class: "muted small tool-description" });
  const fields = h("fieldset", { class: "tool-fields" }, h("legend", {}, "Input"));
  const submit = h("button", { type: "submit", class: "primary", id: "tool-call" }, "Call the tool");
  const output = h("output", { id: "tool-output", for: "tool-name", class: "tool-output" });
  const form = h("form", { id: "tool-form", novalidate: true }, h("div", { class: "field" }, h("label", { for: "tool-name" }, "Tool"), select), description, fields, error, submit, h("h4", {}, "Answer (what the model would see)"), output);
  let tools = [];
  let current = null;

  function choose(name) {
    const tool = tools.find((t) => t.name === name);
    clear(description).append(tool ? tool.description : "");
    while (fields.children.length > 1) fields.lastChild.remove();
    current = tool ? schemaForm(tool.inputSchema, `tool-${tool.name}`) : null;
    if (current) fields.append(current.element);
  }
  select.addEventListener("change", () => choose(select.value));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (!current) return;
    let input;
    try {
      input = current.values();
    } catch (invalid) {
      showError(error, invalid, "Check the input");
      return;
    }
    await busy(submit, async () => {
      const answer = await api.callTool(ctx.sessionId, select.value, input);
      showError(error, null);
      output.textContent = answer.output;
      output.classList.toggle("refused", Boolean(answer.isError));
      output.setAttribute("aria-label", answer.isError ? "The tool refused" : "The tool's answer");
      output.title = answer.isError ? "The tool refused (isError)" : "";
      ctx.refreshContext();
      ctx.refreshPrompt();
    }, error);
  });
  api.tools(ctx.sessionId).then(
    (result) => {
      tools = result.tools;
      for (const tool of tools) select.append(h("option", { value: tool.name }, tool.name));
      if (tools.length) choose(tools[0].name);
      else description.textContent = "This session has no model tools.";
    },
    (caught) => showError(error, caught, "Could not list the tools"),
  );
  return card("Call a model tool", "tool-title", form);
}

export function renderActions(panel, ctx) {
  panel.append(h("div", { class: "panel-head" }, h("h2", {}, "Actions")), h("div", { class: "stack-v" }, appendCard(ctx), toolCard(ctx), forkCard(ctx, panel), compactCard(ctx), splitCard(ctx)));
}
