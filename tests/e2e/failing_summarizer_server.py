"""The local server with a summarizer that always fails: how the live-status tests provoke ``session_error``."""

from __future__ import annotations

import sys

from threadloom import local_server
from threadloom.compaction.summarizers.offline import ExtractiveSummarizer


def unavailable(self: ExtractiveSummarizer, prompt: str) -> str:
    raise RuntimeError("summarizer unavailable (test fault)")


if __name__ == "__main__":
    ExtractiveSummarizer.__call__ = unavailable  # type: ignore[method-assign]
    local_server.main(sys.argv[1:])
