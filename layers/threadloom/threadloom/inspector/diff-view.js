// A line diff drawn as semantic HTML: <ins> and <del> per changed line, long unchanged runs folded.

import { diffLines } from "./diff.js";
import { h } from "./dom.js";

const DIFF_CONTEXT = 2; // unchanged lines kept around each change

/** `{list, changed}`: a <pre> turning `before` into `after` (text only, never HTML) and how many lines differ. */
export function diffView(before, after, label) {
  const ops = diffLines(before, after);
  const changed = ops.filter((o) => o.op !== "same").length;
  const near = new Uint8Array(ops.length);
  ops.forEach((o, i) => {
    if (o.op === "same") return;
    for (let j = Math.max(0, i - DIFF_CONTEXT); j <= Math.min(ops.length - 1, i + DIFF_CONTEXT); j++) near[j] = 1;
  });
  const list = h("pre", { class: "diff", "aria-label": label });
  let skipped = 0;
  const flush = () => {
    if (skipped) list.append(h("span", { class: "line line-skip" }, `⋯ ${skipped} unchanged line${skipped === 1 ? "" : "s"}`), "\n");
    skipped = 0;
  };
  ops.forEach(({ op, text }, i) => {
    if (!near[i]) {
      skipped++;
      return;
    }
    flush();
    const sign = op === "add" ? "+ " : op === "del" ? "- " : "  ";
    list.append(h(op === "same" ? "span" : op === "add" ? "ins" : "del", { class: `line line-${op}` }, sign + text), "\n");
  });
  flush();
  return { list, changed };
}
