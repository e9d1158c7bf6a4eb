"""The deployment profile: one declarative document describing the agent design a stack serves.

A profile lists the context blocks, prompt caching, compaction and limits, i.e. the
``SessionManager`` builder options as data (contract §6), so one template deploys any
agent design without code changes. It is validated with Pydantic so a typo fails at
start-up with the path of the bad field rather than at the first request.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic import ValidationError as PydanticValidationError

from threadloom.errors import ValidationError

DEFAULT_PROFILE_PATH = Path(__file__).parent / "profiles" / "default.yaml"

_LABEL = r"^[A-Za-z0-9_][A-Za-z0-9_-]{0,63}$"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _Block(_Strict):
    label: Annotated[str, Field(pattern=_LABEL)]
    description: str | None = None


class StaticBlock(_Block):
    """Read-only text, rendered into the prompt as is (a persona, house rules)."""

    kind: Literal["static"]
    content: str


class WritableBlock(_Block):
    """A per-session block auto-wired to the store, which the model edits with ``set_context``."""

    kind: Literal["writable"]
    max_tokens: Annotated[int, Field(gt=0)] | None = None


class SkillsBlock(_Block):
    """The deployment's skill store (S3 bucket/prefix or local folder, from the runtime settings)."""

    kind: Literal["skills"]
    keys: list[str] | None = None
    prefix: str | None = None


class SearchBlock(_Block):
    """Searchable keyed entries in the store, shared by the sessions of one tenant."""

    kind: Literal["search"]


BlockSpec = Annotated[StaticBlock | WritableBlock | SkillsBlock | SearchBlock, Field(discriminator="kind")]


class PromptCacheSpec(_Strict):
    """Where the frozen system prompt persists: the store, or a DynamoDB table (the runtime's prompt table)."""

    enabled: bool = True
    backend: Literal["store", "dynamodb"] = "store"
    ttl_seconds: Annotated[int, Field(gt=0)] | None = None


class SummarizerSpec(_Strict):
    """``offline`` (extractive, no model) or ``bedrock`` (a Converse model)."""

    kind: Literal["offline", "bedrock"] = "offline"
    model_id: str | None = None
    max_tokens: Annotated[int, Field(gt=0)] | None = None

    @model_validator(mode="after")
    def _bedrock_needs_model(self) -> SummarizerSpec:
        if self.kind == "bedrock" and not self.model_id:
            raise ValueError("summarizer.kind 'bedrock' needs model_id")
        return self


class CompactionSpec(_Strict):
    """When (``threshold`` tokens) and how (summarizer, head/tail protection) sessions compact."""

    enabled: bool = True
    threshold: Annotated[int, Field(ge=0)] | None = None
    summarizer: SummarizerSpec = SummarizerSpec()
    protect_head: Annotated[int, Field(ge=0)] = 3
    tail_token_budget: Annotated[int, Field(ge=0)] = 20000
    min_tail_messages: Annotated[int, Field(ge=0)] = 2


class LimitsSpec(_Strict):
    """Request and response bounds that keep every Lambda response far below 6 MB."""

    max_message_bytes: Annotated[int, Field(gt=0, le=4 * 1024 * 1024)] = 256 * 1024
    default_page_size: Annotated[int, Field(gt=0)] = 50
    max_page_size: Annotated[int, Field(gt=0, le=1000)] = 200
    search_limit: Annotated[int, Field(gt=0, le=100)] = 20

    @model_validator(mode="after")
    def _page_sizes(self) -> LimitsSpec:
        if self.default_page_size > self.max_page_size:
            raise ValueError("default_page_size cannot exceed max_page_size")
        return self


class Profile(_Strict):
    """The whole deployment profile."""

    name: str = "default"
    blocks: list[BlockSpec] = Field(default_factory=list)
    prompt_cache: PromptCacheSpec = PromptCacheSpec()
    compaction: CompactionSpec = CompactionSpec()
    searchable_history: Annotated[str, Field(pattern=_LABEL)] | None = None
    limits: LimitsSpec = LimitsSpec()

    @model_validator(mode="after")
    def _unique_labels(self) -> Profile:
        labels = [block.label for block in self.blocks]
        if self.searchable_history:
            labels.append(self.searchable_history)
        duplicates = sorted({label for label in labels if labels.count(label) > 1})
        if duplicates:
            raise ValueError(f"duplicate block labels: {', '.join(duplicates)}")
        return self


def parse_profile(data: Any, *, source: str = "profile") -> Profile:
    """Validate an already parsed document; errors name every bad field (``ValidationError``)."""
    try:
        return Profile.model_validate(data)
    except PydanticValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in error['loc']) or '<root>'}: {error['msg']}" for error in exc.errors()
        )
        raise ValidationError(f"Invalid deployment profile {source}: {problems}") from exc


def load_profile(path: str | Path | None = None) -> Profile:
    """Read a JSON or YAML profile (the bundled ``default.yaml`` when ``path`` is None)."""
    target = Path(path) if path else DEFAULT_PROFILE_PATH
    try:
        text = target.read_text(encoding="utf-8")
    except OSError as exc:
        raise ValidationError(f"Cannot read deployment profile {target}: {exc}") from exc
    try:
        data = json.loads(text) if target.suffix == ".json" else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as exc:
        raise ValidationError(f"Deployment profile {target} is not valid JSON/YAML: {exc}") from exc
    return parse_profile(data, source=str(target))


__all__ = [
    "DEFAULT_PROFILE_PATH",
    "BlockSpec",
    "CompactionSpec",
    "LimitsSpec",
    "Profile",
    "PromptCacheSpec",
    "SearchBlock",
    "SkillsBlock",
    "StaticBlock",
    "SummarizerSpec",
    "WritableBlock",
    "load_profile",
    "parse_profile",
]
