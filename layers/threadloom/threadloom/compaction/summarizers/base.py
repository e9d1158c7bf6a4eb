"""The one thing a summarizer must do, so model-backed and offline ones are interchangeable."""

from __future__ import annotations

from typing import Protocol, runtime_checkable


@runtime_checkable
class Summarizer(Protocol):
    """Turns a summary prompt (from ``build_summary_prompt``) into the summary body."""

    def __call__(self, prompt: str) -> str: ...


__all__ = ["Summarizer"]
