// A form built from a tool's JSON Schema input (the subset model tools use: an object of scalar,
// enum, array and object properties). Arrays and objects are typed as JSON.

import { h } from "./dom.js";

const LONG_TEXT = /content|text|summary|body|query|description/i;

function fieldFor(name, schema, required, idPrefix) {
  const id = `${idPrefix}-${name}`;
  const type = Array.isArray(schema.type) ? schema.type.find((t) => t !== "null") : schema.type;
  const label = h("label", { for: id }, name, required ? h("span", { class: "required", "aria-hidden": "true" }, " *") : null);
  const hint = schema.description ? h("p", { class: "muted small", id: `${id}-hint` }, schema.description) : null;
  const common = { id, name, required: required || null, "aria-describedby": hint ? `${id}-hint` : null };
  let input;
  let read;
  if (Array.isArray(schema.enum)) {
    input = h("select", common, required ? null : h("option", { value: "" }, "(not set)"), ...schema.enum.map((v) => h("option", { value: String(v) }, String(v))));
    read = () => (input.value === "" ? undefined : schema.enum.find((v) => String(v) === input.value));
  } else if (type === "boolean") {
    input = h("input", { ...common, type: "checkbox", required: null });
    read = () => input.checked;
  } else if (type === "integer" || type === "number") {
    input = h("input", { ...common, type: "number", step: type === "integer" ? "1" : "any", min: schema.minimum ?? null, max: schema.maximum ?? null });
    read = () => (input.value === "" ? undefined : Number(input.value));
  } else if (type === "object" && schema.properties && Object.keys(schema.properties).length) {
    // A nested object with known properties: its own fieldset, omitted when every field is empty.
    const nested = schemaForm(schema, id);
    const element = h("fieldset", { class: "field nested" }, h("legend", {}, name, required ? " *" : ""), hint, nested.element);
    const read = () => {
      const value = nested.values();
      return Object.keys(value).length ? value : undefined;
    };
    return { element, read, name, required };
  } else if (type === "array" || type === "object") {
    input = h("textarea", { ...common, rows: 3, placeholder: type === "array" ? "[ … ] as JSON" : "{ … } as JSON", spellcheck: "false" });
    read = () => {
      if (!input.value.trim()) return undefined;
      try {
        return JSON.parse(input.value);
      } catch (error) {
        throw new Error(`“${name}” must be JSON (${error.message})`);
      }
    };
  } else {
    input = LONG_TEXT.test(name) ? h("textarea", { ...common, rows: 3 }) : h("input", { ...common, type: "text", autocomplete: "off" });
    read = () => (input.value === "" && !required ? undefined : input.value);
  }
  if (schema.default !== undefined && input.type !== "checkbox") input.value = String(schema.default);
  return { element: h("div", { class: `field field-${type || "any"}` }, label, input, hint), read, name, required };
}

/**
 * Build the fields for `schema` inside a fieldset; returns `{element, values()}` where
 * `values()` gives the input object or throws an Error naming what is missing or malformed.
 */
export function schemaForm(schema, idPrefix) {
  const properties = (schema && schema.properties) || {};
  const required = new Set((schema && schema.required) || []);
  const fields = Object.entries(properties).map(([name, prop]) => fieldFor(name, prop || {}, required.has(name), idPrefix));
  const element = h("div", { class: "schema-form" }, ...fields.map((f) => f.element));
  if (!fields.length) element.append(h("p", { class: "muted" }, "This tool takes no input."));
  return {
    element,
    values() {
      const input = {};
      for (const field of fields) {
        const value = field.read();
        if (value === undefined || value === "") {
          if (field.required) throw new Error(`“${field.name}” is required`);
          continue;
        }
        input[field.name] = value;
      }
      return input;
    },
  };
}
