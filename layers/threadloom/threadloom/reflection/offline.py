"""The offline extractor: keeps only what the user plainly said about themselves, and never invents anything.

It reads user messages only (never the assistant's, never tool output) and splits their text into sentences
(at ``.``, ``!``, ``?`` or a line break). A sentence counts only when it *starts* with one of these forms, after
at most some filler (``hi``, ``hello``, ``hey``, ``oh``, ``ok``, ``okay``, ``well``, ``also``, ``and``, ``so``,
``btw``, ``by the way``, ``actually``, ``fyi``, ``please``, each optionally followed by a comma); a question (a
sentence ending in ``?``) never counts, nor does a value starting with ``not`` or ``no``:

=========================================  =================================
The user writes                            The block gains
=========================================  =================================
``my name is <name>``                      ``Name: <name>``
``call me <name>`` / ``I go by <name>``    ``Preferred name: <name>``
``my pronouns are <value>``                ``Pronouns: <value>``
``my favorite|favourite <thing> is <v>``   ``Favorite <thing>: <v>``
``I prefer <value>``                       ``Prefers: <value>``
=========================================  =================================

``<name>`` is one to three words of letters (digits, ``'``, ``-`` and ``.`` inside a word), ending before
``and``, ``but``, ``or``, ``so``, ``from``, ``by``, ``because`` or ``too``; ``<value>`` is the rest of the
sentence, up to 120 characters (longer is dropped, not cut), without its closing punctuation. The words are kept
as the user typed them. Anything else (``I am tired``, ``my friend's name is Bo``, ``is my name Al?``) is ignored.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Final

from threadloom.reflection.facts import Fact

if TYPE_CHECKING:
    from collections.abc import Sequence

    from threadloom.reflection.facts import UserStatement

MAX_VALUE_CHARS: Final = 120
_FILLER = r"(?:(?:hi|hello|hey|oh|ok|okay|well|also|and|so|btw|by the way|actually|fyi|please)\s*[,!]?\s+)*"
_WORD = r"[^\W\d_][\w'\u2019.-]*"
_STOP = frozenset({"and", "but", "or", "so", "from", "by", "because", "too"})
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
_FORMS: Final = (
    (re.compile(rf"^{_FILLER}my name is (?P<value>.+)$", re.IGNORECASE), "Name", True),
    (re.compile(rf"^{_FILLER}(?:call me|i go by) (?P<value>.+)$", re.IGNORECASE), "Preferred name", True),
    (re.compile(rf"^{_FILLER}my pronouns are (?P<value>.+)$", re.IGNORECASE), "Pronouns", False),
    (
        re.compile(rf"^{_FILLER}my favou?rite (?P<thing>{_WORD}(?: {_WORD})?) is (?P<value>.+)$", re.IGNORECASE),
        "Favorite",
        False,
    ),
    (re.compile(rf"^{_FILLER}i prefer (?P<value>.+)$", re.IGNORECASE), "Prefers", False),
)


def _sentences(text: str) -> list[str]:
    return [part.strip() for part in _SENTENCE_END.split(text) if part.strip()]


def _name(text: str) -> str | None:
    """One to three words of a name, up to the first stop word or punctuation; None when there is none."""
    words: list[str] = []
    for word in text.split():
        bare = word.rstrip(".,;:!")
        if bare.casefold() in _STOP or not re.fullmatch(_WORD, bare):
            break
        words.append(bare)
        if bare != word or len(words) == 3:
            break
    return " ".join(words) or None


def _value(text: str) -> str | None:
    value = text.strip().rstrip(".!;,: ")
    return value if value and len(value) <= MAX_VALUE_CHARS else None


def facts_in(sentence: str, message_id: str) -> list[Fact]:
    """The facts one sentence states (none for a question)."""
    if sentence.endswith("?"):
        return []
    for pattern, key, is_name in _FORMS:
        match = pattern.match(sentence)
        if match is None:
            continue
        raw = match.group("value")
        if raw.split()[0].casefold() in {"not", "no"}:
            return []
        value = _name(raw) if is_name else _value(raw)
        if value is None:
            return []
        thing = match.groupdict().get("thing")
        return [Fact(f"{key} {thing.casefold()}" if thing else key, value, message_id)]
    return []


class SelfStatementExtractor:
    """``FactExtractor`` over fixed patterns (see the module docstring for exactly what it keeps)."""

    def __call__(self, statements: Sequence[UserStatement]) -> list[Fact]:
        return [
            fact
            for statement in statements
            for sentence in _sentences(statement.text)
            for fact in facts_in(sentence, statement.message_id)
        ]


__all__ = ["MAX_VALUE_CHARS", "SelfStatementExtractor", "facts_in"]
