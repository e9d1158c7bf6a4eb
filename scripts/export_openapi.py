"""Write the HTTP API's OpenAPI 3.1 document to ``openapi.json`` at the repository root.

Run ``.venv/bin/python scripts/export_openapi.py``; ``tests/contract/test_openapi_export.py``
fails when the committed file differs from what the app serves.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUTPUT = ROOT / "openapi.json"


def render() -> str:
    """The document as committed: sorted keys, two-space indent, trailing newline."""
    for folder in (ROOT / "functions" / "api", ROOT / "layers" / "threadloom"):
        if str(folder) not in sys.path:
            sys.path.insert(0, str(folder))
    from threadloom_api import openapi_json

    return json.dumps(json.loads(openapi_json()), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def main() -> None:
    OUTPUT.write_text(render(), encoding="utf-8")
    print(f"wrote {OUTPUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
