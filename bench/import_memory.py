"""Peak memory of an import: a hostile 64 MB line, and a large valid file, streamed versus held whole.

Three cases, each measured with tracemalloc (every Python allocation, peak over the call):

- one 64 MB message line after a header: refused once the line cap (1.6 MiB by default) is read;
- the same line starting ``{"type":"prompt"``, whose cap is larger (6 x ``max_response_bytes``);
- a valid file of SESSIONS sessions of MESSAGES messages imported into a fresh SQLite database
  with ``import_sessions`` (two passes, one session at a time), next to ``read_export``, which
  holds every session at once (what the import did before).

Run: .venv/bin/python bench/import_memory.py [SESSIONS] [MESSAGES]   (default 100 x 100)
"""

from __future__ import annotations

import hashlib
import json
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import TYPE_CHECKING, Any

from threadloom import SqliteStore
from threadloom.lifecycle import ExportFormatError, import_sessions, read_export
from threadloom.lifecycle.export_format import max_line_bytes, max_prompt_line_bytes
from threadloom.limits import DEFAULT_LIMITS

if TYPE_CHECKING:
    from collections.abc import Callable

MIB = 1024 * 1024
AT = "2026-01-01T11:00:00.000Z"
HEADER = {"type": "header", "format": "threadloom-export", "version": 1, "exported_at": AT, "namespace": "bench"}


def line(record: dict[str, Any]) -> bytes:
    return (json.dumps(record, separators=(",", ":")) + "\n").encode()


def session_lines(index: int, messages: int) -> list[bytes]:
    sid = f"s{index}"
    lines = [
        line(
            {
                "type": "session",
                "id": sid,
                "name": f"session {index}",
                "parent_session_id": None,
                "model": None,
                "source": None,
                "subject_id": None,
                "legal_hold": False,
                "end_reason": None,
                "created_at": AT,
                "updated_at": AT,
                "usage": {"input_tokens": 0, "output_tokens": 0, "estimated_cost": 0.0},
                "leaf_id": f"m{messages - 1}",
                "next_seq": messages + 1,
            }
        )
    ]
    for number in range(messages):
        mid = f"m{number}"
        message = {
            "id": mid,
            "role": "user" if number % 2 == 0 else "assistant",
            "parts": [{"type": "text", "text": f"message {number} of session {index} " * 25}],
        }
        record = {
            "type": "message",
            "session_id": sid,
            "id": mid,
            "parent_id": f"m{number - 1}" if number else None,
            "seq": number + 1,
            "created_at": AT,
            "message": message,
        }
        lines.append(line(record))
    return lines


def write_file(path: Path, body: list[bytes], sessions: int) -> None:
    raw = [line(HEADER), *body]
    digest = hashlib.sha256(b"".join(raw)).hexdigest()
    footer = {"type": "footer", "sessions": sessions, "records": len(raw) + 1, "sha256": digest}
    path.write_bytes(b"".join(raw) + line(footer))


def peak(action: Callable[[], object]) -> tuple[int, float, str]:
    """Peak traced bytes, seconds, and how it ended."""
    tracemalloc.start()
    start = time.perf_counter()
    try:
        action()
        outcome = "imported"
    except ExportFormatError as error:
        outcome = f"refused: {str(error)[:70]}"
    finally:
        seconds = time.perf_counter() - start
        high = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return high, seconds, outcome


def main() -> None:
    sessions = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    messages = int(sys.argv[2]) if len(sys.argv) > 2 else 100
    print(
        f"line caps: {max_line_bytes(DEFAULT_LIMITS) / MIB:.2f} MiB, "
        f"prompt lines {max_prompt_line_bytes(DEFAULT_LIMITS) / MIB:.2f} MiB"
    )
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        text = "a" * (64 * 1000 * 1000)
        hostile = root / "line.jsonl"
        hostile.write_bytes(line(HEADER) + b'{"type":"message","session_id":"s","text":"' + text.encode() + b'"}\n')
        prompt = root / "prompt.jsonl"
        prompt.write_bytes(line(HEADER) + b'{"type":"prompt","session_id":"s","content":"' + text.encode() + b'"}\n')
        del text
        big = root / "big.jsonl"
        write_file(big, [row for index in range(sessions) for row in session_lines(index, messages)], sessions)

        def importing(path: Path, database: str) -> Callable[[], object]:
            def run() -> object:
                store = SqliteStore(str(root / database))
                try:
                    with path.open("rb") as stream:
                        return import_sessions(store.lifecycle(), "bench", stream)
                finally:
                    store.close()

            return run

        def holding(path: Path) -> Callable[[], object]:
            def run() -> object:
                with path.open("rb") as stream:
                    return read_export(stream)

            return run

        cases = [
            (f"64 MB message line ({hostile.stat().st_size / MIB:.1f} MiB file)", importing(hostile, "a.db")),
            (f"64 MB prompt line ({prompt.stat().st_size / MIB:.1f} MiB file)", importing(prompt, "b.db")),
            (
                f"{sessions} x {messages} messages ({big.stat().st_size / MIB:.1f} MiB file), import_sessions",
                importing(big, "c.db"),
            ),
            ("same file, read_export (every session held)", holding(big)),
        ]
        for name, action in cases:
            high, seconds, outcome = peak(action)
            print(f"{name:<62} peak {high / MIB:7.1f} MiB  {seconds:6.2f} s  {outcome}")


if __name__ == "__main__":
    main()
