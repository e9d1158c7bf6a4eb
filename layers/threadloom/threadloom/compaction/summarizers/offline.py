"""A summarizer that needs no model: it quotes and trims the conversation instead of paraphrasing it.

It exists for tests, local development and air-gapped deployments. It reads the
prompt that ``build_summary_prompt`` wrote (the ``[role]`` blocks between the
anchors, the previous summary when there is one, and ``Target ~N tokens.``), so
it slots in wherever a model-backed summarizer would. It is deterministic and
says plainly, in its output, that it is extractive.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Final

from threadloom.compaction.summary_prompt import (
    CONVERSATION_ANCHOR,
    MESSAGE_SEPARATOR,
    NEW_TURNS_ANCHOR,
    PREVIOUS_SUMMARY_ANCHOR,
    SECTION_HEADINGS,
)
from threadloom.jscompat import JS_WHITESPACE_RUN, js_trim
from threadloom.tokens import estimate_string_tokens

EXTRACTIVE_NOTICE: Final = (
    "(Extractive summary made offline without a language model: each line quotes or trims the conversation.)"
)
DEFAULT_TARGET_TOKENS: Final = 400

_TARGET = re.compile(r"Target ~(\d+) tokens\.")
_ROLE_LINE = re.compile(r"^\[([^\]\n]*)\]$")
_TOOL_LINE = re.compile(r"^\[Tool: (.*)\]$")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_OPEN_MARKER = re.compile(r"\b(TODO|TBD|FIXME)\b|^(next step|next|still need|pending)\b", re.IGNORECASE)
_OMITTED_NOTE = re.compile(r"^\((\d+) earlier points? omitted")
_NO_TOPIC: Final = "Not stated in the conversation."
_NO_POINTS: Final = "Nothing recorded."
_NO_STATE: Final = "Not stated."
_NO_OPEN_ITEMS: Final = "None recorded."
_PLACEHOLDERS: Final = frozenset({_NO_TOPIC, _NO_POINTS, _NO_STATE, _NO_OPEN_ITEMS})
_TOPIC, _KEY_POINTS, _CURRENT_STATE, _OPEN_ITEMS = SECTION_HEADINGS


@dataclass(frozen=True, slots=True)
class ParsedTool:
    """One ``[Tool: name]`` entry of a rendered turn."""

    name: str
    input: str | None = None
    output: str | None = None


@dataclass(frozen=True, slots=True)
class ParsedTurn:
    """One ``[role]`` block of the rendered conversation."""

    role: str
    text: str
    tools: tuple[ParsedTool, ...] = ()


@dataclass(frozen=True, slots=True)
class ParsedPrompt:
    """What the offline summarizer understood of a summary prompt."""

    turns: tuple[ParsedTurn, ...]
    previous_summary: str | None
    target_tokens: int | None


@dataclass(slots=True)
class _Sections:
    topic: list[str] = field(default_factory=list)
    key_points: list[str] = field(default_factory=list)
    current_state: list[str] = field(default_factory=list)
    open_items: list[str] = field(default_factory=list)
    omitted: int = 0


def _anchor_end(prompt: str, anchor: str, start: int = 0) -> int | None:
    """Index just after ``anchor`` written on a line of its own, or None."""
    needle = f"{anchor}\n"
    index = prompt.find(needle, start)
    while index != -1 and index > 0 and prompt[index - 1] != "\n":
        index = prompt.find(needle, index + 1)
    return None if index == -1 else index + len(needle)


def _parse_turn(block: str) -> ParsedTurn | None:
    lines = block.split("\n")
    role_match = _ROLE_LINE.match(lines[0])
    if role_match is None:
        return None
    text_lines: list[str] = []
    tools: list[dict[str, str | None]] = []
    current_field: str | None = None
    for line in lines[1:]:
        tool_match = _TOOL_LINE.match(line)
        if tool_match is not None:
            tools.append({"name": tool_match.group(1), "input": None, "output": None})
            current_field = None
        elif tools and line.startswith(("Input: ", "Output: ")):
            current_field = "input" if line.startswith("Input: ") else "output"
            tools[-1][current_field] = line.split(": ", 1)[1]
        elif tools and current_field is not None:
            tools[-1][current_field] = f"{tools[-1][current_field]}\n{line}"
        elif not tools:
            text_lines.append(line)
    return ParsedTurn(
        role=role_match.group(1),
        text="\n".join(text_lines),
        tools=tuple(ParsedTool(name=t["name"] or "unknown", input=t["input"], output=t["output"]) for t in tools),
    )


def parse_summary_prompt(prompt: str) -> ParsedPrompt:
    """Recover the turns, the previous summary and the target size from a ``build_summary_prompt`` prompt."""
    targets = _TARGET.findall(prompt)
    target = int(targets[-1]) if targets else None
    previous: str | None = None
    content_start = None
    previous_start = _anchor_end(prompt, PREVIOUS_SUMMARY_ANCHOR)
    if previous_start is not None:
        content_start = _anchor_end(prompt, NEW_TURNS_ANCHOR, previous_start)
        if content_start is not None:
            previous = prompt[previous_start : content_start - len(NEW_TURNS_ANCHOR) - 1].removesuffix("\n\n")
    if content_start is None:
        content_start = _anchor_end(prompt, CONVERSATION_ANCHOR)
    if content_start is None:
        return ParsedPrompt(turns=(), previous_summary=previous, target_tokens=target)
    content_end = prompt.rfind(f"\n\n{_TOPIC}\n")
    if content_end >= content_start:
        content = prompt[content_start:content_end]
        if "\n\n" in content:
            # The template puts one instruction paragraph between the conversation and the headings.
            content = content.rpartition("\n\n")[0]
    else:
        content = prompt[content_start:]
    turns = tuple(turn for block in content.split(MESSAGE_SEPARATOR) if (turn := _parse_turn(block)) is not None)
    return ParsedPrompt(turns=turns, previous_summary=previous, target_tokens=target)


def _clip(text: str, limit: int) -> str:
    """Collapse whitespace and cut at a word boundary, marking the cut with an ellipsis."""
    flat = js_trim(JS_WHITESPACE_RUN.sub(" ", text))
    if len(flat) <= limit:
        return flat
    cut = flat[: max(limit - 1, 1)]
    if " " in cut[limit // 2 :]:
        cut = cut[: cut.rfind(" ")]
    return f"{cut.rstrip()}\u2026"


def _sentences(text: str) -> list[str]:
    flat = js_trim(JS_WHITESPACE_RUN.sub(" ", text))
    return [piece for piece in _SENTENCE_END.split(flat) if piece] if flat else []


def _split_previous(summary: str) -> _Sections:
    """Lines of each section of an earlier summary (bullets unwrapped, hint lines dropped)."""
    sections = _Sections()
    targets = {
        _TOPIC: sections.topic,
        _KEY_POINTS: sections.key_points,
        _CURRENT_STATE: sections.current_state,
        _OPEN_ITEMS: sections.open_items,
    }
    current: list[str] | None = None
    for raw in summary.split("\n"):
        line = js_trim(raw)
        if line in targets:
            current = targets[line]
        elif line.startswith("## "):
            current = None
        elif current is not None and line and not (line.startswith("[") and line.endswith("]")):
            item = line[2:] if line.startswith(("- ", "* ")) else line
            omitted = _OMITTED_NOTE.match(item)
            if omitted is not None:
                sections.omitted += int(omitted.group(1))
            elif item and item not in _PLACEHOLDERS and item not in current:
                current.append(item)
    if not (sections.topic or sections.key_points or sections.current_state or sections.open_items):
        # A summary written in some other layout: keep its lines as key points rather than lose them.
        for raw in summary.split("\n"):
            line = js_trim(raw)
            if line and line != EXTRACTIVE_NOTICE and not line.startswith("#"):
                item = line[2:] if line.startswith(("- ", "* ")) else line
                if item not in sections.key_points:
                    sections.key_points.append(item)
    return sections


class ExtractiveSummarizer:
    """Deterministic, model-free :class:`~threadloom.compaction.summarizers.Summarizer`.

    ``sentence_chars`` caps how much of each turn is quoted; the whole summary is
    kept near the prompt's ``Target ~N tokens.`` by dropping the oldest key
    points first (``default_target_tokens`` when the prompt names no target).
    """

    def __init__(self, *, sentence_chars: int = 160, default_target_tokens: int = DEFAULT_TARGET_TOKENS) -> None:
        if sentence_chars < 20:
            raise ValueError("sentence_chars must be at least 20")
        self.sentence_chars = sentence_chars
        self.default_target_tokens = default_target_tokens

    def __call__(self, prompt: str) -> str:
        """Summarize the turns found in ``prompt`` under the four standard headings."""
        parsed = parse_summary_prompt(prompt)
        previous = _split_previous(parsed.previous_summary or "")
        target = parsed.target_tokens or self.default_target_tokens
        sections = self._sections(parsed.turns, previous)
        limit = self.sentence_chars
        text = self._render(sections)
        if estimate_string_tokens(text) <= target:
            return text
        sections, text = self._drop_oldest_points(sections, target)
        while estimate_string_tokens(text) > target and limit > 40:
            limit //= 2
            sections = self._shrink(sections, limit)
            text = self._render(sections)
        return text

    def _drop_oldest_points(self, sections: _Sections, target: int) -> tuple[_Sections, str]:
        """Drop the fewest oldest key points (keeping at least one) that bring the text near ``target``.

        A binary search over how many to drop: O(n log n) for n points, where dropping
        one at a time and re-rendering was O(n^2) and made long sessions uncompactable.
        """
        points = sections.key_points

        def without(dropped: int) -> tuple[_Sections, str]:
            trimmed = _Sections(
                topic=sections.topic,
                key_points=points[dropped:],
                current_state=sections.current_state,
                open_items=sections.open_items,
                omitted=sections.omitted + dropped,
            )
            return trimmed, self._render(trimmed)

        low, high = 0, max(len(points) - 1, 0)  # the answer lies in [low, high]
        while low < high:
            middle = (low + high) // 2
            if estimate_string_tokens(without(middle)[1]) <= target:
                high = middle
            else:
                low = middle + 1
        return without(low)

    def _sections(self, turns: tuple[ParsedTurn, ...], previous: _Sections) -> _Sections:
        limit = self.sentence_chars
        sections = _Sections(omitted=previous.omitted)
        first_user = next((t for t in turns if t.role == "user" and _sentences(t.text)), None)
        first_any = first_user or next((t for t in turns if _sentences(t.text)), None)
        if previous.topic:
            sections.topic = previous.topic[:1]
        elif first_any is not None:
            sections.topic = [_clip(_sentences(first_any.text)[0], limit)]

        sections.key_points = list(previous.key_points)
        for turn in turns:
            sentences = _sentences(turn.text)
            if sentences:
                sections.key_points.append(f"{turn.role}: {_clip(' '.join(sentences[:2]), limit)}")
            for tool in turn.tools:
                detail = f" \u2192 {_clip(tool.output, limit // 2)}" if tool.output else ""
                sections.key_points.append(f"{turn.role} used tool {tool.name}{detail}")

        last_reply = next((t for t in reversed(turns) if t.role == "assistant" and _sentences(t.text)), None)
        last_tool = next((tool for t in reversed(turns) for tool in reversed(t.tools)), None)
        if last_reply is not None:
            sections.current_state.append(f"Last assistant reply: {_clip(_sentences(last_reply.text)[-1], limit)}")
        if last_tool is not None:
            sections.current_state.append(f"Last tool used: {last_tool.name}")
        if not sections.current_state:
            sections.current_state = list(previous.current_state)

        sections.open_items = list(previous.open_items)
        last_assistant = max((i for i, t in enumerate(turns) if t.role == "assistant"), default=-1)
        for index, turn in enumerate(turns):
            for sentence in _sentences(turn.text):
                unanswered = turn.role == "user" and index > last_assistant and sentence.endswith("?")
                if unanswered or _OPEN_MARKER.search(sentence):
                    item = _clip(sentence, limit)
                    if item not in sections.open_items:
                        sections.open_items.append(item)
        return sections

    @staticmethod
    def _shrink(sections: _Sections, limit: int) -> _Sections:
        return _Sections(
            topic=[_clip(line, limit) for line in sections.topic],
            key_points=[_clip(line, limit) for line in sections.key_points],
            current_state=[_clip(line, limit) for line in sections.current_state],
            open_items=[_clip(line, limit) for line in sections.open_items],
            omitted=sections.omitted,
        )

    @staticmethod
    def _render(sections: _Sections) -> str:
        key_points = list(sections.key_points)
        if sections.omitted:
            noun = "point" if sections.omitted == 1 else "points"
            key_points.insert(0, f"({sections.omitted} earlier {noun} omitted to stay near the target size)")

        def bullets(lines: list[str], empty: str) -> str:
            return "\n".join(f"- {line}" for line in lines) if lines else f"- {empty}"

        return "\n\n".join(
            [
                EXTRACTIVE_NOTICE,
                f"{_TOPIC}\n{sections.topic[0] if sections.topic else _NO_TOPIC}",
                f"{_KEY_POINTS}\n{bullets(key_points, _NO_POINTS)}",
                f"{_CURRENT_STATE}\n{bullets(sections.current_state, _NO_STATE)}",
                f"{_OPEN_ITEMS}\n{bullets(sections.open_items, _NO_OPEN_ITEMS)}",
            ]
        )


__all__ = [
    "EXTRACTIVE_NOTICE",
    "ExtractiveSummarizer",
    "ParsedPrompt",
    "ParsedTool",
    "ParsedTurn",
    "parse_summary_prompt",
]
