"""The Bedrock extractor: a Converse model reads the user's messages and lists what they said about themselves.

It uses the Bedrock summarizer (``compaction.summarizers.bedrock``: the same client, retries, timeouts and error
handling) with a system prompt of its own, and trusts the model no more than it must: only user messages are sent,
each with its id; the answer must be a JSON array of ``{"key", "value", "message_id"}``; a fact whose
``message_id`` is not one of the messages sent, or whose value does not occur in that message's text
(case-insensitively), is dropped, so the model can rephrase a key but cannot invent a value. A failed call
raises ``CompactionError`` (the queue retries the request); an answer that is not such an array raises it too.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Final

from threadloom.compaction.summarizers.bedrock import BedrockSummarizer
from threadloom.errors import CompactionError
from threadloom.reflection.facts import Fact

if TYPE_CHECKING:
    from collections.abc import Sequence

    from mypy_boto3_bedrock_runtime import BedrockRuntimeClient

    from threadloom.reflection.facts import UserStatement

SYSTEM_PROMPT: Final = (
    "You maintain a memory of facts about a user. You are given messages the user wrote, each with its id. "
    "List only facts the user states about themselves: their name, the name they want to be called, pronouns, "
    "and explicit preferences or favourites. Never infer, guess or generalise; skip anything hypothetical, "
    "anything about other people and anything the user asks. Answer with a JSON array only, each item "
    '{"key": "<short label such as Name, Preferred name, Pronouns, Prefers, Favorite color>", '
    '"value": "<the user\'s own words>", "message_id": "<the id of the message that states it>"}. '
    "Answer [] when there is nothing."
)
DEFAULT_MAX_TOKENS: Final = 1024


def render_statements(statements: Sequence[UserStatement]) -> str:
    """The prompt: one JSON object per message, so ids and text cannot be confused whatever the text holds."""
    lines = [json.dumps({"message_id": item.message_id, "text": item.text}, ensure_ascii=False) for item in statements]
    return "Messages from the user, one JSON object per line:\n" + "\n".join(lines)


def _json_array(answer: str) -> list[Any]:
    start, end = answer.find("["), answer.rfind("]")
    try:
        parsed = json.loads(answer[start : end + 1]) if 0 <= start < end else None
    except ValueError:
        parsed = None
    if not isinstance(parsed, list):
        raise CompactionError("The reflection model did not answer with a JSON array of facts")
    return parsed


class BedrockFactExtractor:
    """``FactExtractor`` that asks a Bedrock model (Converse) and keeps only the facts it can check."""

    def __init__(
        self, model_id: str, *, client: BedrockRuntimeClient | None = None, max_tokens: int | None = None
    ) -> None:
        self.summarizer = BedrockSummarizer(
            model_id, client=client, max_tokens=max_tokens or DEFAULT_MAX_TOKENS, system_prompt=SYSTEM_PROMPT
        )

    def __call__(self, statements: Sequence[UserStatement]) -> list[Fact]:
        if not statements:
            return []
        texts = {item.message_id: item.text.casefold() for item in statements}
        facts: list[Fact] = []
        for item in _json_array(self.summarizer(render_statements(statements))):
            if not isinstance(item, dict):
                continue
            key, value, message_id = item.get("key"), item.get("value"), item.get("message_id")
            if not (isinstance(key, str) and isinstance(value, str) and isinstance(message_id, str)):
                continue
            key, value = " ".join(key.split()), " ".join(value.split())
            if message_id in texts and value and value.casefold() in " ".join(texts[message_id].split()):
                facts.append(Fact(key, value, message_id))
        return facts


__all__ = ["SYSTEM_PROMPT", "BedrockFactExtractor", "render_statements"]
