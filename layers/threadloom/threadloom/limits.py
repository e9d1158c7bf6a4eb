"""The one table of limits and text rules every write path enforces, HTTP and model tools alike.

Why one table: when the API model, the library and the tools each carried their own
bounds they disagreed (a 201-looking validation followed by a 400, a 4 MB knowledge
entry through ``set_context`` where ``PUT`` refused 256 KB). Now the library checks
every write against a :class:`Limits` (``DEFAULT_LIMITS`` unless the deployment
profile sets others), and the HTTP schema is derived from ``HARD_LIMITS``, the
ceilings no profile may raise.

Text rules, identical on SQLite and PostgreSQL and checked before anything reaches a
database: no NUL character (PostgreSQL ``text`` cannot hold one) and no lone UTF-16
surrogate (not encodable as UTF-8, so no driver can send it). JSON values nest at
most ``max_nesting_depth`` levels and carry only finite numbers.
"""

from __future__ import annotations

import math
import re
import threading
from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING, Any, Final

from threadloom.errors import PayloadTooLargeError, ValidationError

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from threadloom.records import Message

KIB: Final = 1024
MIB: Final = 1024 * KIB

ROLES: Final = ("system", "user", "assistant")
"""The roles of an AI SDK ``UIMessage``; anything else is refused rather than becoming the leaf."""

TEXT_PART_TYPES: Final = frozenset({"text", "reasoning"})
"""``UIMessage`` part types whose ``text`` string is required (search, token estimates and the inspector read it)."""

ID_ALPHABET: Final = "A-Z a-z 0-9 - _ . ~ : @"
"""Characters an id may use: the ones a URL path carries unchanged, so an accepted id can always be addressed.

API Gateway hands the Lambda a percent-decoded ``rawPath`` cut at a decoded ``?``, and the local
server decodes the same way. With this alphabet an id reads back whether a client sends it as is
or percent-encoded (``a%3Ab`` is ``a:b``), so ``GET .../messages/{id}`` finds every accepted message.
"""
_ID_PATTERN: Final = re.compile(r"[A-Za-z0-9_.~:@-]+")


@dataclass(frozen=True, slots=True)
class Limits:
    """Bounds on what may be written and returned (bytes are UTF-8 bytes; ``chars`` are code points)."""

    max_message_bytes: int = 256 * KIB
    """One message as compact JSON."""
    max_chain_messages: int = 500
    """Messages in one chain append."""
    max_id_chars: int = 256
    """Message and session ids (and the ids that refer to them: parents, leaves)."""
    max_name_chars: int = 1024
    """Session names, ``model`` and ``source``."""
    max_label_chars: int = 64
    """Context block labels."""
    max_block_bytes: int = 256 * KIB
    """A writable block's whole content."""
    max_entry_bytes: int = 64 * KIB
    """One knowledge (search) entry."""
    max_entries_per_tenant: int = 1000
    """Knowledge entries one tenant may hold per block."""
    max_skill_bytes: int = 128 * KIB
    """One skill document."""
    max_skill_description_chars: int = 200
    """A skill's one-line description (it is rendered into the system prompt)."""
    max_skills_per_tenant: int = 50
    """Skills one tenant may write per skills block (the operator catalogue does not count)."""
    max_summary_bytes: int = 256 * KIB
    """A compaction or split summary."""
    max_nesting_depth: int = 64
    """Levels of JSON objects and arrays inside one message or tool input."""
    max_usage_tokens: int = 10**15
    """Input or output tokens of one session, per call and in total (exact in a JSON double)."""
    max_usage_cost: float = 1e12
    """A session's estimated cost, per call and in total."""
    max_tenant_chars: int = 256
    """The tenant claim."""
    max_query_chars: int = 1000
    """A search query."""
    default_page_size: int = 50
    """Items on a list page when the caller gives no ``limit``."""
    max_page_size: int = 200
    """Most items on one list page."""
    search_limit: int = 20
    """Hits returned when the caller gives no ``limit``."""
    max_search_limit: int = 100
    """Most hits one search returns."""
    max_response_bytes: int = 5 * MIB
    """Most bytes of one response body (Lambda refuses responses over 6 MB); lists page by bytes too."""
    max_fork_messages: int = 50_000
    """Messages one fork may copy (its history up to the fork point, overlays applied).

    The copy is one transaction: 50,000 messages took 1.3 s on PostgreSQL (100,000: 3.3 s on a loaded
    machine), which keeps a fork well inside the default 5 s statement timeout."""

    def __post_init__(self) -> None:
        for item in fields(self):
            value = getattr(self, item.name)
            ceiling = getattr(HARD_LIMITS, item.name, None) if "HARD_LIMITS" in globals() else None
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise ValidationError(f"limits.{item.name} must be a positive number, not {value!r}")
            if ceiling is not None and value > ceiling:
                raise ValidationError(f"limits.{item.name} is {value}; it cannot exceed {ceiling}")
        if self.default_page_size > self.max_page_size:
            raise ValidationError("limits.default_page_size cannot exceed limits.max_page_size")
        if self.search_limit > self.max_search_limit:
            raise ValidationError("limits.search_limit cannot exceed limits.max_search_limit")

    def with_overrides(self, overrides: Mapping[str, Any]) -> Limits:
        """A copy with some values replaced (unknown names raise ``ValidationError``)."""
        known = {item.name for item in fields(self)}
        unknown = sorted(set(overrides) - known)
        if unknown:
            raise ValidationError(f"Unknown limits: {', '.join(unknown)}")
        return replace(self, **dict(overrides))

    # ------------------------------------------------------------ text rules

    def check_message(self, message: Any) -> Message:
        """The whole message rule: shape, id alphabet, role, text rules, nesting depth and size."""
        if not isinstance(message, dict):
            raise ValidationError(f"A message must be a JSON object, got {type(message).__name__}")
        message_id = self.check_id(message.get("id"), "message id")
        role = message.get("role")
        if role not in ROLES:
            raise ValidationError(f"Message {message_id!r} has role {role!r}; a role is one of {', '.join(ROLES)}")
        parts = message.get("parts")
        if not isinstance(parts, list):
            raise ValidationError(f"Message {message_id!r} needs a 'parts' list")
        for index, part in enumerate(parts):
            if not isinstance(part, dict) or not isinstance(part.get("type"), str):
                raise ValidationError(f"Part {index} of message {message_id!r} must be an object with a string 'type'")
            if part["type"] in TEXT_PART_TYPES and not isinstance(part.get("text"), str):
                # The message format (AI SDK UIMessage) requires it; without it the part showed as an empty card.
                raise ValidationError(
                    f"Part {index} of message {message_id!r} is a {part['type']!r} part and needs a string 'text'"
                )
        size = self.check_json(message, f"message {message_id!r}")
        if size > self.max_message_bytes:
            raise PayloadTooLargeError(
                f"Message {message_id!r} is {size} bytes; the limit is {self.max_message_bytes} bytes"
            )
        _just_checked.message = message
        return message

    def check_json(self, value: Any, what: str, *, extra_depth: int = 0) -> int:
        """Check a JSON value's strings, numbers and nesting; returns roughly its compact UTF-8 size in bytes.

        Iterative, so a hostile depth cannot exhaust the Python stack before it is refused. A plain
        string inside an object or array, most of a message, is measured where it is met instead of
        going through the stack (every append runs this).
        """
        size = 0
        max_depth = self.max_nesting_depth + extra_depth
        stack: list[tuple[Any, int]] = [(value, 0)]
        push = stack.append
        while stack:
            item, depth = stack.pop()
            if isinstance(item, (dict, list)):
                if depth >= max_depth:
                    raise ValidationError(f"The {what} nests deeper than {self.max_nesting_depth} levels")
                depth += 1
                children: Iterable[Any]
                if isinstance(item, dict):
                    size += 2
                    for key in item:
                        if not isinstance(key, str):
                            raise ValidationError(f"The {what} has a non-string object key")
                        size += (len(key) if key.isascii() and "\x00" not in key else text_bytes(key, what)) + 4
                    children = item.values()
                else:
                    size += 2 + len(item)
                    children = item
                for child in children:
                    if child.__class__ is str:
                        size += (len(child) if child.isascii() and "\x00" not in child else text_bytes(child, what)) + 2
                    else:
                        push((child, depth))
            else:
                size += _leaf_size(item, what)
        return size

    def check_id(self, value: Any, what: str = "id") -> str:
        """An id a URL path can carry: 1..``max_id_chars`` characters of ``ID_ALPHABET``, not only dots."""
        if not isinstance(value, str) or not value:
            raise ValidationError(f"The {what} must be a non-empty string")
        if len(value) > self.max_id_chars:
            raise ValidationError(f"The {what} is longer than {self.max_id_chars} characters")
        if not _ID_PATTERN.fullmatch(value) or not value.strip("."):
            raise ValidationError(
                f"The {what} {shown(value)} may only use the characters {ID_ALPHABET} (and not only dots),"
                " so that it can be used in a URL path"
            )
        return value

    def check_optional_id(self, value: Any, what: str) -> str | None:
        return None if value is None else self.check_id(value, what)

    def check_name(self, value: Any, what: str = "name", *, optional: bool = False) -> str | None:
        """Free text of at most ``max_name_chars`` characters (session names, model, source)."""
        if value is None and optional:
            return None
        return check_text(value, what, max_chars=self.max_name_chars)

    def check_label(self, value: Any, what: str = "label") -> str:
        return check_text(value, what, max_chars=self.max_label_chars)

    def check_content(self, value: Any, what: str, max_bytes: int) -> str:
        """Text content with a byte ceiling (block, entry, skill, summary)."""
        text = check_text(value, what)
        size = text_bytes(text, what)
        if size > max_bytes:
            raise PayloadTooLargeError(f"The {what} is {size} bytes; the limit is {max_bytes} bytes")
        return text

    def check_block_content(self, value: Any, label: str) -> str:
        return self.check_content(value, f'content of block "{label}"', self.max_block_bytes)

    def check_usage(self, input_tokens: Any, output_tokens: Any, cost: Any) -> None:
        """One usage increment: non-negative integers and a finite non-negative cost, each within its bound."""
        for name, value in (("inputTokens", input_tokens), ("outputTokens", output_tokens)):
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= self.max_usage_tokens:
                raise ValidationError(f"{name} must be an integer from 0 to {self.max_usage_tokens}")
        if (
            isinstance(cost, bool)
            or not isinstance(cost, (int, float))
            or not math.isfinite(cost)
            or not 0 <= cost <= self.max_usage_cost
        ):
            raise ValidationError(f"cost must be a finite number from 0 to {self.max_usage_cost:g}")

    def check_usage_totals(self, input_tokens: int, output_tokens: int, cost: float) -> None:
        """A session's totals after an increment stay within the same bounds (sums never overflow)."""
        if input_tokens > self.max_usage_tokens or output_tokens > self.max_usage_tokens:
            raise ValidationError(f"The session's token totals would exceed {self.max_usage_tokens}")
        if not math.isfinite(cost) or cost > self.max_usage_cost:
            raise ValidationError(f"The session's estimated cost would exceed {self.max_usage_cost:g}")

    def check_tenant(self, value: Any) -> str:
        """A tenant claim: non-blank text of at most ``max_tenant_chars`` characters."""
        text = check_text(value, "tenant", max_chars=self.max_tenant_chars)
        if not text.strip():
            raise ValidationError("The tenant must not be blank")
        return text

    def page_size(self, limit: int | None) -> int:
        """The page size for a caller's ``limit`` (default when None, capped at ``max_page_size``)."""
        if limit is None:
            return self.default_page_size
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ValidationError("limit must be a positive integer")
        return min(limit, self.max_page_size)

    def check_fork_size(self, messages: int, at_message_id: str) -> None:
        """A fork copies at most ``max_fork_messages`` messages in one request (413 beyond)."""
        if messages > self.max_fork_messages:
            raise PayloadTooLargeError(
                f"The history up to message {shown(at_message_id)} holds {messages} messages; "
                f"a fork copies at most {self.max_fork_messages}"
            )

    def search_size(self, limit: int | None) -> int:
        if limit is None:
            return self.search_limit
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ValidationError("limit must be a positive integer")
        return min(limit, self.max_search_limit)


HARD_LIMITS: Final = Limits(
    max_message_bytes=4 * MIB,
    max_chain_messages=1000,
    max_id_chars=256,
    max_name_chars=4096,
    max_label_chars=64,
    max_block_bytes=4 * MIB,
    max_entry_bytes=4 * MIB,
    max_entries_per_tenant=1_000_000,
    max_skill_bytes=4 * MIB,
    max_skill_description_chars=1024,
    max_skills_per_tenant=10_000,
    max_summary_bytes=4 * MIB,
    max_nesting_depth=128,
    max_usage_tokens=2**53 - 1,
    max_usage_cost=1e15,
    max_tenant_chars=1024,
    max_query_chars=10_000,
    default_page_size=1000,
    max_page_size=1000,
    search_limit=100,
    max_search_limit=100,
    max_response_bytes=5 * MIB + 512 * KIB,
    max_fork_messages=1_000_000,
)
"""Ceilings a profile cannot raise: what the OpenAPI schema documents and every response stays under."""

DEFAULT_LIMITS: Final = Limits()
"""What the library enforces unless a session, manager or profile is given other limits."""


class _JustChecked(threading.local):
    message: Any = None


_just_checked = _JustChecked()


def take_just_checked(message: Any) -> bool:
    """Whether ``message`` is the object this thread's last :meth:`Limits.check_message` passed (forgotten now).

    Every ``Limits`` is capped by ``HARD_LIMITS``, so a message a session just checked needs no
    second check by the storage it hands the message to, on the same thread, moments later: that
    second walk over every string was a tenth of an append's Python time.
    """
    if _just_checked.message is message:
        _just_checked.message = None
        return True
    return False


def check_text(value: Any, what: str, *, max_chars: int | None = None) -> str:
    """A string without NUL characters or lone surrogates, optionally at most ``max_chars`` long."""
    if not isinstance(value, str):
        raise ValidationError(f"The {what} must be a string")
    if max_chars is not None and len(value) > max_chars:
        raise ValidationError(f"The {what} is longer than {max_chars} characters")
    text_bytes(value, what)
    return value


def _leaf_size(item: Any, what: str) -> int:
    """:meth:`Limits.check_json` for a value that holds no other: its rule and its size."""
    if isinstance(item, str):
        # ASCII without a NUL is the common case and needs no encoding to be measured
        return (len(item) if item.isascii() and "\x00" not in item else text_bytes(item, what)) + 2
    if isinstance(item, bool) or item is None:
        return 5
    if isinstance(item, int):
        if abs(item) > 2**63:
            raise ValidationError(f"The {what} holds an integer outside the 64-bit range")
        return 20
    if isinstance(item, float):
        if not math.isfinite(item):
            raise ValidationError(f"The {what} holds a number that is not finite")
        return 24
    raise ValidationError(f"The {what} holds a {type(item).__name__}, which is not JSON")


def text_bytes(value: str, what: str) -> int:
    """UTF-8 size of ``value`` after checking the text rules (one C-speed encode does both)."""
    if "\x00" in value:
        raise ValidationError(f"The {what} contains a NUL character (U+0000), which cannot be stored")
    try:
        return len(value.encode("utf-8"))
    except UnicodeEncodeError:
        raise ValidationError(
            f"The {what} contains a lone UTF-16 surrogate (such as \\ud800), which is not valid Unicode text"
        ) from None


def shown(value: str) -> str:
    """A caller's text as an error message quotes it: at most 40 characters, unprintable ones escaped."""
    shown = value if len(value) <= 40 else value[:40] + "…"
    return ascii(shown) if not shown.isprintable() or not _encodable(shown) else repr(shown)


def _encodable(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


__all__ = [
    "DEFAULT_LIMITS",
    "HARD_LIMITS",
    "ID_ALPHABET",
    "KIB",
    "MIB",
    "ROLES",
    "Limits",
    "check_text",
    "take_just_checked",
    "text_bytes",
]
