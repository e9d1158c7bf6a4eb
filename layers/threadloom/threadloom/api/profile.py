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
from threadloom.limits import DEFAULT_LIMITS, HARD_LIMITS, Limits
from threadloom.records import DEFAULT_KEEP_VERSIONS

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
    """A block auto-wired to the store, which the model edits with ``set_context``.

    ``scope`` says who shares it: the session (the default), every session of the session's
    subject (the end user: the JWT ``sub`` or the ``subjectId`` it was created with), or every
    session of the tenant.
    """

    kind: Literal["writable"]
    max_tokens: Annotated[int, Field(gt=0)] | None = None
    scope: Literal["session", "subject", "tenant"] = "session"


class BlockHistorySpec(_Strict):
    """How much history each writable block keeps: the last ``keep_versions`` changes, and with
    ``keep_days`` only those younger than that (both bound it); the current version always stays."""

    keep_versions: Annotated[int, Field(gt=0, le=100000)] = DEFAULT_KEEP_VERSIONS
    keep_days: Annotated[int, Field(gt=0, le=36500)] | None = None


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


class RetentionSpec(_Strict):
    """How long an inactive session is kept; ``None`` keeps sessions until they are deleted.

    The retention sweep (a scheduled Lambda, or ``threadloom retention sweep``) removes whole
    sessions whose last activity is older than ``inactive_days``, except those on legal hold.
    """

    inactive_days: Annotated[int, Field(gt=0)] | None = None


class ReflectionSpec(_Strict):
    """Reflection (docs/reflection.md): memory extracted off the request path into the writable block ``block``.

    ``approval: required`` keeps every edit ``pending`` until approved over HTTP; ``none`` applies them at once.
    ``extractor`` is the summarizer configuration: ``offline`` (fixed patterns, never invents) or ``bedrock``.
    """

    enabled: bool = False
    block: Annotated[str, Field(pattern=_LABEL)] = "memory"
    approval: Literal["none", "required"] = "none"
    extractor: SummarizerSpec = SummarizerSpec()
    after_compaction: bool = True
    idle_minutes: Annotated[int, Field(gt=0)] | None = None
    max_messages: Annotated[int, Field(gt=0, le=1000)] = 200


def _limit_field(name: str) -> Any:
    """A profile field for one entry of the limits table: positive, at most its hard ceiling."""
    default = getattr(DEFAULT_LIMITS, name)
    return Field(default=default, gt=0, le=getattr(HARD_LIMITS, name))


class LimitsSpec(_Strict):
    """The limits table (``threadloom.limits``) as profile data; every key optional, defaults from the table."""

    max_message_bytes: int = _limit_field("max_message_bytes")
    max_chain_messages: int = _limit_field("max_chain_messages")
    max_id_chars: int = _limit_field("max_id_chars")
    max_name_chars: int = _limit_field("max_name_chars")
    max_label_chars: int = _limit_field("max_label_chars")
    max_block_bytes: int = _limit_field("max_block_bytes")
    max_entry_bytes: int = _limit_field("max_entry_bytes")
    max_entries_per_tenant: int = _limit_field("max_entries_per_tenant")
    max_skill_bytes: int = _limit_field("max_skill_bytes")
    max_skill_description_chars: int = _limit_field("max_skill_description_chars")
    max_skills_per_tenant: int = _limit_field("max_skills_per_tenant")
    max_summary_bytes: int = _limit_field("max_summary_bytes")
    max_nesting_depth: int = _limit_field("max_nesting_depth")
    max_usage_tokens: int = _limit_field("max_usage_tokens")
    max_usage_cost: float = _limit_field("max_usage_cost")
    max_tenant_chars: int = _limit_field("max_tenant_chars")
    max_query_chars: int = _limit_field("max_query_chars")
    default_page_size: int = _limit_field("default_page_size")
    max_page_size: int = _limit_field("max_page_size")
    search_limit: int = _limit_field("search_limit")
    max_search_limit: int = _limit_field("max_search_limit")
    max_response_bytes: int = _limit_field("max_response_bytes")
    max_fork_messages: int = _limit_field("max_fork_messages")

    @model_validator(mode="after")
    def _consistent(self) -> LimitsSpec:
        try:
            self.to_limits()
        except ValidationError as exc:
            raise ValueError(str(exc)) from exc
        return self

    def to_limits(self) -> Limits:
        """The library's table with these values."""
        return Limits(**self.model_dump())


class Profile(_Strict):
    """The whole deployment profile."""

    name: str = "default"
    blocks: list[BlockSpec] = Field(default_factory=list)
    prompt_cache: PromptCacheSpec = PromptCacheSpec()
    compaction: CompactionSpec = CompactionSpec()
    searchable_history: Annotated[str, Field(pattern=_LABEL)] | None = None
    limits: LimitsSpec = LimitsSpec()
    retention: RetentionSpec = RetentionSpec()
    block_history: BlockHistorySpec = BlockHistorySpec()
    reflection: ReflectionSpec = ReflectionSpec()

    @property
    def has_subject_blocks(self) -> bool:
        """Whether a block is shared by a subject's sessions (so who may name a subject matters)."""
        return any(block.kind == "writable" and block.scope == "subject" for block in self.blocks)

    @model_validator(mode="after")
    def _reflection_block_is_writable(self) -> Profile:
        if self.reflection.enabled:
            label = self.reflection.block
            if not any(block.label == label and block.kind == "writable" for block in self.blocks):
                raise ValueError(f"reflection.block {label!r} is not a writable block of this profile")
        return self

    @model_validator(mode="after")
    def _unique_labels(self) -> Profile:
        labels = [block.label for block in self.blocks]
        if self.searchable_history:
            labels.append(self.searchable_history)
        duplicates = sorted({label for label in labels if labels.count(label) > 1})
        if duplicates:
            raise ValueError(f"duplicate block labels: {', '.join(duplicates)}")
        return self


class ProfileError(ValidationError):
    """A deployment profile that cannot be used; ``str()`` is one line naming the file, the key and the problem.

    Raised at start (``threadloom serve`` prints it and exits, a Lambda logs it once at init), so an invalid
    profile never reaches a request.
    """


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _problem(error: Any) -> str:
    """One Pydantic error as ``key: problem``; an unknown key says so in those words."""
    key = ".".join(str(part) for part in error["loc"]) or "<root>"
    message = "unknown key" if error["type"] == "extra_forbidden" else error["msg"]
    return f"{key}: {_one_line(str(message))}"


def parse_profile(data: Any, *, source: str = "profile") -> Profile:
    """Validate an already parsed document; errors name every bad field (``ProfileError``)."""
    try:
        return Profile.model_validate(data)
    except PydanticValidationError as exc:
        problems = "; ".join(_problem(error) for error in exc.errors())
        raise ProfileError(f"Invalid deployment profile {source}: {problems}") from exc


def load_profile(path: str | Path | None = None) -> Profile:
    """Read a JSON or YAML profile (the bundled ``default.yaml`` when ``path`` is None)."""
    target = Path(path) if path else DEFAULT_PROFILE_PATH
    try:
        text = target.read_text(encoding="utf-8")
    except OSError as exc:
        raise ProfileError(f"Cannot read deployment profile {target}: {_one_line(str(exc))}") from exc
    try:
        data = json.loads(text) if target.suffix == ".json" else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as exc:
        raise ProfileError(f"Invalid deployment profile {target}: not valid JSON/YAML: {_one_line(str(exc))}") from exc
    return parse_profile(data, source=str(target))


__all__ = [
    "DEFAULT_PROFILE_PATH",
    "BlockHistorySpec",
    "BlockSpec",
    "CompactionSpec",
    "LimitsSpec",
    "Profile",
    "ProfileError",
    "PromptCacheSpec",
    "ReflectionSpec",
    "RetentionSpec",
    "SearchBlock",
    "SkillsBlock",
    "StaticBlock",
    "SummarizerSpec",
    "WritableBlock",
    "load_profile",
    "parse_profile",
]
