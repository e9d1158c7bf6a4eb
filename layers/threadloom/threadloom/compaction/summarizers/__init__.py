"""Summarizers for ``create_compact_function``: an offline extractive one and one backed by Amazon Bedrock."""

from __future__ import annotations

from threadloom.compaction.summarizers.base import Summarizer
from threadloom.compaction.summarizers.bedrock import BedrockSummarizer
from threadloom.compaction.summarizers.offline import ExtractiveSummarizer

__all__ = ["BedrockSummarizer", "ExtractiveSummarizer", "Summarizer"]
