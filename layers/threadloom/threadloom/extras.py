"""Optional dependencies come in extras (``pip install 'threadloom[local]'``); a missing one is one line naming it.

The check looks the modules up without importing them, so it costs a feature nothing when they are there.
"""

from __future__ import annotations

import importlib.util

EXTRA_PACKAGES: dict[str, tuple[tuple[str, str], ...]] = {
    # extra: (module imported, package pip installs) for each dependency the extra adds
    "local": (
        ("aiohttp", "aiohttp"),
        ("aws_lambda_powertools", "aws-lambda-powertools"),
        ("pydantic", "pydantic"),
        ("typer", "typer"),
    ),
    "client": (("httpx", "httpx"),),
    "mcp": (("mcp", "mcp"), ("pydantic", "pydantic"), ("aws_lambda_powertools", "aws-lambda-powertools")),
    "openai-agents": (("agents", "openai-agents"),),
    "strands": (("strands", "strands-agents"),),
    "langchain": (("langchain_core", "langchain-core"),),
}


class MissingExtraError(ImportError):
    """A feature whose extra is not installed; the message names the extra to install."""


def missing_extra_message(feature: str, extra: str, *modules: str) -> str | None:
    """``threadloom: <feature> needs <packages>: pip install 'threadloom[<extra>]'``, or None when all are there.

    ``modules`` narrows the check to what the feature imports (default: every package of the extra).
    """
    wanted = [(module, package) for module, package in EXTRA_PACKAGES[extra] if not modules or module in modules]
    missing = [package for module, package in wanted if importlib.util.find_spec(module) is None]
    if not missing:
        return None
    return f"threadloom: {feature} needs {', '.join(missing)}: pip install 'threadloom[{extra}]'"


def require_extra(feature: str, extra: str, *modules: str) -> None:
    """Raise ``MissingExtraError`` (one line naming the extra) unless the feature's packages are installed."""
    message = missing_extra_message(feature, extra, *modules)
    if message is not None:
        raise MissingExtraError(message)
