"""Summarizers for ``create_compact_function``: an offline extractive one and one backed by Amazon Bedrock.

The Bedrock summarizer is imported on first access, so a deployment that does not configure it never loads it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from threadloom.compaction.summarizers.base import Summarizer
from threadloom.compaction.summarizers.offline import ExtractiveSummarizer

if TYPE_CHECKING:
    from threadloom.compaction.summarizers.bedrock import BedrockSummarizer


def __getattr__(name: str) -> Any:
    if name == "BedrockSummarizer":
        return importlib.import_module("threadloom.compaction.summarizers.bedrock").BedrockSummarizer
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["BedrockSummarizer", "ExtractiveSummarizer", "Summarizer"]
