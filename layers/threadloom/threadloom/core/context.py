"""The context-block manager: loads blocks from their providers, guards writes, tracks skills.

It also owns the system-prompt snapshot. The snapshot is deliberately sticky:
writes change the blocks but not the prompt until someone refreshes it, so the
LLM's prefix cache keeps hitting between turns.

Over 400 lines because loading, guarded writes, skills and the prompt snapshot all act on the one
set of blocks held here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Final, TypeAlias, cast

from threadloom.core.prompt import render_block, render_prompt
from threadloom.errors import BlockLimitError, NotFoundError, ReadOnlyBlockError, StaleVersionError, ValidationError
from threadloom.limits import DEFAULT_LIMITS, Limits, check_text
from threadloom.providers.protocols import BlockRead, is_search_provider, is_skill_provider, is_writable_provider
from threadloom.records import BlockChange, ContextBlock
from threadloom.tokens import estimate_string_tokens

if TYPE_CHECKING:
    from collections.abc import Iterable

    from threadloom.providers.protocols import (
        ContextProvider,
        SearchProvider,
        SkillProvider,
        VersionedContextProvider,
        WritableContextProvider,
    )
    from threadloom.records import BlockScope, BlockVersion

UnloadCallback: TypeAlias = Callable[[str, str], None]
"""Called with ``(label, key)`` right after a skill is unloaded (the Session rewrites history)."""

LoadedSkillsListener: TypeAlias = Callable[[set[str]], None]
"""Called with a copy of the loaded-skill ids after every change, so they can be persisted."""

ChangeSource: TypeAlias = Callable[[], BlockChange]
"""Builds the provenance of a change made by a model tool call (the session and its latest message)."""

LIBRARY_CHANGE: Final = BlockChange(source="library")

APPEND_ATTEMPTS: Final = 50
"""How often an append re-reads and retries when other writers keep changing the block meanwhile."""


class _Held:
    """``based_on_version`` default: the version this object holds in memory (what the model was shown)."""


HELD: Final = _Held()


def is_versioned_provider(provider: object) -> bool:
    """A provider whose changes are versions (``current``, ``write``, ``versions``, ``version``)."""
    return all(callable(getattr(provider, name, None)) for name in ("current", "write", "versions", "version"))


def _versioned(provider: object) -> VersionedContextProvider:
    return cast("VersionedContextProvider", provider)


class _NotRead:
    """The content of a block whose provider has not been read yet."""


NOT_READ: Final = _NotRead()


def _init(config: ContextConfig) -> None:
    init = getattr(config.provider, "init", None)
    if callable(init):
        init(config.label)


@dataclass(slots=True)
class _ReadPlan:
    """The planned reads of a session's blocks: ``reads`` by config index, and the contents already known."""

    reads: dict[int, BlockRead]
    known: dict[int, str | None]
    declined: dict[int, ContextProvider]
    """Providers ``init``-ed for a plan whose ``block_read()`` declined: read through ``get()``."""

    def finish(self) -> dict[int, str | None]:
        """Run the reads not yet answered, together per channel; what ``get()`` returns for each."""
        for index, provider in self.declined.items():
            self.known[index] = provider.get()
        self.declined = {}
        by_channel: dict[int, list[int]] = {}
        for index, read in self.reads.items():
            by_channel.setdefault(id(read.channel), []).append(index)
        for indexes in by_channel.values():
            channel = self.reads[indexes[0]].channel
            answers = channel.read_together([self.reads[index].statement for index in indexes])
            self.answer(indexes, answers)
        return self.known

    def answer(self, indexes: list[int], answers: Iterable[object]) -> None:
        for index, answer in zip(indexes, answers, strict=True):
            self.known[index] = self.reads.pop(index).finish(answer)


def _plan_reads(configs: list[ContextConfig]) -> _ReadPlan:
    """The ``block_read()`` of each provider that offers one; nothing is read yet.

    The memory, knowledge and history blocks of a session all read one database: sent together
    they cost one round trip on PostgreSQL instead of three. Those providers are ``init``-ed here
    (before their read is planned, as ``get`` would be); one that declines is read through
    ``get()`` when the plan is finished, and the others one by one as before (not in the plan).
    """
    plan = _ReadPlan(reads={}, known={}, declined={})
    for index, config in enumerate(configs):
        provider = config.provider
        block_read = getattr(provider, "block_read", None) if provider is not None else None
        if callable(block_read):
            _init(config)
            read = block_read()
            if isinstance(read, BlockRead):
                plan.reads[index] = read
            else:  # it declined: read through get() when the plan is finished, as it is already init-ed
                plan.declined[index] = cast("ContextProvider", provider)
    return plan


@dataclass(frozen=True, slots=True)
class ContextConfig:
    """How one block is configured: its label, prompt metadata, budget and provider.

    A block without a provider is empty and read-only (and so never rendered).
    """

    label: str
    description: str | None = None
    max_tokens: int | None = None
    provider: ContextProvider | None = None
    scope: BlockScope = "session"
    """Who shares the block's content: this session, every session of its subject, or the tenant."""


def skill_id(label: str, key: str) -> str:
    """The id a loaded skill is tracked under: ``"<label>:<key>"``."""
    return f"{label}:{key}"


def _provider_set(provider: object) -> Callable[..., object]:
    # Only called after is_writable_provider(provider) was checked.
    return cast("Callable[..., object]", getattr(provider, "set"))  # noqa: B009


class ContextBlocks:
    """Blocks of one session, in configuration order, plus the loaded-skill set and prompt snapshot.

    Providers are detected by duck typing (``set`` = writable, ``load`` = skill,
    ``search`` = searchable). Nothing is read from providers until :meth:`load`
    (or a method that needs the blocks) runs.
    """

    def __init__(
        self,
        configs: Iterable[ContextConfig] = (),
        prompt_store: WritableContextProvider | None = None,
        *,
        on_unload: UnloadCallback | None = None,
        on_loaded_skills_changed: LoadedSkillsListener | None = None,
        loaded_skills: Callable[[], Iterable[str]] | None = None,
        limits: Limits = DEFAULT_LIMITS,
        tool_change: ChangeSource | None = None,
        on_shared_change: Callable[[str, str], None] | None = None,
    ) -> None:
        self._configs: list[ContextConfig] = list(configs)
        # Called with (label, scope) after a subject or tenant block changed: other sessions' prompts are stale.
        self.on_shared_change = on_shared_change
        # The provenance of a change that names none: a model tool call (the Session says which).
        self.tool_change = tool_change
        # Every write (block content, skill, search entry) is checked against this table first.
        self.limits = limits
        # Where the frozen prompt persists; None keeps it in memory only.
        self.prompt_store = prompt_store
        self.on_unload = on_unload
        self.on_loaded_skills_changed = on_loaded_skills_changed
        self._blocks: dict[str, ContextBlock] = {}
        self._loaded = False
        self._snapshot: str | None = None
        #: The stored frozen prompt as last read or written here (the estimate reuses it).
        self._frozen: str | None = None
        #: Whether the estimate found no stored prompt: later estimates render the blocks without asking again.
        self._estimate_found_none = False
        # Where the persisted loaded-skill ids come from: read on first use, since most requests
        # (an append, a history page, the prompt) never look at them (a round trip on PostgreSQL).
        self._read_loaded_skills = loaded_skills
        # A dict rather than a set: iteration follows insertion order, as a JS Set does,
        # so the unload_context description lists skills in the order they were loaded.
        self._loaded_skill_ids: dict[str, None] | None = None if loaded_skills is not None else {}

    @property
    def _loaded_skills(self) -> dict[str, None]:
        if self._loaded_skill_ids is None:
            read, self._read_loaded_skills = self._read_loaded_skills, None
            self._loaded_skill_ids = dict.fromkeys(read() if read is not None else ())
        return self._loaded_skill_ids

    @_loaded_skills.setter
    def _loaded_skills(self, ids: dict[str, None]) -> None:
        self._loaded_skill_ids = ids

    # -- configuration and loading ------------------------------------------------------------

    @property
    def configs(self) -> tuple[ContextConfig, ...]:
        """The configured blocks, in order (duplicates included)."""
        return tuple(self._configs)

    @property
    def is_loaded(self) -> bool:
        """Whether the providers have been read since construction or the last refresh."""
        return self._loaded

    def _config(self, label: str) -> ContextConfig | None:
        # With duplicate labels the first config wins for writes, as in the reference.
        return next((config for config in self._configs if config.label == label), None)

    def _provider(self, label: str) -> ContextProvider | None:
        config = self._config(label)
        return config.provider if config is not None else None

    @staticmethod
    def _read_block(config: ContextConfig, known: str | _NotRead | None = NOT_READ) -> ContextBlock:
        """The block of ``config``: ``init`` then ``get``, unless its content was read already (``known``)."""
        provider = config.provider
        if provider is None:
            return ContextBlock(
                label=config.label,
                description=config.description,
                content="",
                tokens=0,
                max_tokens=config.max_tokens,
                writable=False,
                is_skill=False,
                is_searchable=False,
                scope=config.scope,
            )
        if isinstance(known, _NotRead):
            _init(config)
            known = provider.get()
        content = known or ""
        loaded_version = getattr(provider, "loaded_version", None)
        return ContextBlock(
            label=config.label,
            description=config.description,
            content=content,
            tokens=estimate_string_tokens(content),
            max_tokens=config.max_tokens,
            writable=is_writable_provider(provider),
            is_skill=is_skill_provider(provider),
            is_searchable=is_search_provider(provider),
            scope=config.scope,
            version=loaded_version if isinstance(loaded_version, int) else None,
        )

    def load(self) -> None:
        """Read every provider once (``init(label)`` then ``get()``), in configuration order.

        A duplicated label keeps its first position but shows the last config's
        content and flags. ``max_tokens`` is not enforced on what is read.
        """
        self._load_with(_plan_reads(self._configs).finish())

    def _load_with(self, known: dict[int, str | None]) -> None:
        """Read the providers not in ``known`` (``init`` then ``get``) and hold every block."""
        blocks: dict[str, ContextBlock] = {}
        for index, config in enumerate(self._configs):
            blocks[config.label] = self._read_block(config, known.get(index, NOT_READ))
        self._blocks = blocks
        self._loaded = True

    def ensure_loaded(self) -> None:
        """Load unless already loaded (so repeated calls never re-``init`` providers)."""
        if not self._loaded:
            self.load()

    def get_block(self, label: str) -> ContextBlock | None:
        """The block as currently held in memory; never loads (``None`` before the first load)."""
        return self._blocks.get(label)

    def get_blocks(self) -> list[ContextBlock]:
        """All blocks in memory, in order; never loads (``[]`` before the first load)."""
        return list(self._blocks.values())

    def add_block(self, config: ContextConfig) -> ContextBlock:
        """Add and load one more block at the end. The frozen prompt is left as it was."""
        self.ensure_loaded()
        if self._config(config.label) is not None or config.label in self._blocks:
            raise ValidationError(f'Block "{config.label}" already exists')
        block = self._read_block(config)
        self._configs.append(config)
        self._blocks[config.label] = block
        return block

    def remove_block(self, label: str) -> bool:
        """Forget a block and its loaded skills; False if unknown.

        History is not rewritten (no unload callback), matching the reference.
        """
        remaining = [config for config in self._configs if config.label != label]
        if len(remaining) == len(self._configs):
            return False
        self._configs = remaining
        self._blocks.pop(label, None)
        prefix = f"{label}:"
        self._replace_loaded_skills([sid for sid in self._loaded_skills if not sid.startswith(prefix)])
        return True

    # -- writes ---------------------------------------------------------------------------------

    def set_block(
        self,
        label: str,
        content: str,
        *,
        based_on_version: int | _Held | None = HELD,
        change: BlockChange | None = None,
    ) -> ContextBlock:
        """Replace a regular block's content, within its token budget, and persist it.

        The provider is written first, so a failing write leaves memory unchanged. A versioned
        provider stores the change as a version with ``change`` as its provenance (a model tool
        call when omitted); the write is refused with :class:`StaleVersionError` when the block
        is no longer at ``based_on_version`` (by default the version held here, which is what
        the model was shown; ``None`` replaces whatever is stored). On that refusal the block
        held here becomes the stored one, so reading it again shows the current content.
        """
        self.ensure_loaded()
        block, config, tokens, max_tokens = self._checked_write(label, content)
        provider = config.provider if config is not None else None
        version: int | None = None
        if is_versioned_provider(provider):
            base = block.version if isinstance(based_on_version, _Held) else based_on_version
            try:
                version = _versioned(provider).write(content, based_on_version=base, change=self._change(change))
            except StaleVersionError as stale:
                self._hold(label, stale.current_content or "", stale.current_version)
                raise
            if block.scope != "session" and self.on_shared_change is not None:
                self.on_shared_change(label, block.scope)
        elif is_writable_provider(provider):
            _provider_set(provider)(content)
        description = config.description if config is not None and config.description is not None else block.description
        updated = ContextBlock(
            label=label,
            description=description,
            content=content,
            tokens=tokens,
            max_tokens=max_tokens,
            writable=True,
            is_skill=False,
            is_searchable=False,
            scope=block.scope,
            version=version,
        )
        self._blocks[label] = updated
        return updated

    def _change(self, change: BlockChange | None) -> BlockChange:
        if change is not None:
            return change
        return self.tool_change() if self.tool_change is not None else LIBRARY_CHANGE

    def _checked_write(self, label: str, content: str) -> tuple[ContextBlock, ContextConfig | None, int, int | None]:
        """The block a write of ``content`` goes to, after every check: size, kind, token budget."""
        block = self._blocks.get(label)
        if block is None or not block.writable:
            raise ReadOnlyBlockError(f'Block "{label}" is readonly')
        self.limits.check_block_content(content, label)
        if block.is_skill or block.is_searchable:
            raise ReadOnlyBlockError(
                f'Block "{label}" is a keyed provider. Use setSkill() or setSearchEntry() instead.'
            )
        config = self._config(label)
        tokens = estimate_string_tokens(content)
        max_tokens = config.max_tokens if config is not None and config.max_tokens is not None else block.max_tokens
        if max_tokens is not None and tokens > max_tokens:
            raise BlockLimitError(f'Block "{label}" exceeds maxTokens: {tokens} > {max_tokens}')
        return block, config, tokens, max_tokens

    def _hold(self, label: str, content: str, version: int | None) -> ContextBlock | None:
        """Hold ``content`` at ``version`` as the block's current state (read from the store)."""
        block = self._blocks.get(label)
        if block is None:
            return None
        held = replace(block, content=content, tokens=estimate_string_tokens(content), version=version)
        self._blocks[label] = held
        return held

    def append_to_block(self, label: str, content: str, *, change: BlockChange | None = None) -> ContextBlock:
        """Append to a regular block, adding a newline unless one is already there.

        The budget applies to the combined text. On a versioned provider the append is merged
        with what is stored now, not with what this object holds: when another writer changed
        the block meanwhile, it re-reads and appends again, so concurrent appends all land, in
        the order they commit.
        """
        self.ensure_loaded()
        block = self._blocks.get(label)
        if block is None:
            raise NotFoundError(f'Block "{label}" not found')
        provider = self._provider(label)
        if not is_versioned_provider(provider):
            separator = "\n" if block.content and not content.startswith("\n") else ""
            return self.set_block(label, block.content + separator + content)
        versioned = _versioned(provider)
        stored, version = "", 0
        for _ in range(APPEND_ATTEMPTS):
            read, version = versioned.current()
            stored = read or ""
            separator = "\n" if stored and not content.startswith("\n") else ""
            self._hold(label, stored, version)
            try:
                return self.set_block(label, stored + separator + content, based_on_version=version, change=change)
            except StaleVersionError:
                continue
        raise StaleVersionError(
            f'Block "{label}" kept changing while appending; nothing was appended, try again',
            current_version=version,
            current_content=stored,
        )

    def reload_block(self, label: str) -> ContextBlock | None:
        """The block as stored now (content and version), held from now on; None when unknown."""
        self.ensure_loaded()
        provider = self._provider(label)
        if not is_versioned_provider(provider):
            return self._blocks.get(label)
        content, version = _versioned(provider).current()
        return self._hold(label, content or "", version)

    def _versioned_block(self, label: str) -> VersionedContextProvider:
        self.ensure_loaded()
        if label not in self._blocks:
            raise NotFoundError(f'Block "{label}" not found')
        provider = self._provider(label)
        if not is_versioned_provider(provider):
            raise ValidationError(f'Block "{label}" keeps no history (it is not a writable block of the store)')
        return _versioned(provider)

    def block_versions(
        self, label: str, *, before: int | None, limit: int, max_bytes: int
    ) -> tuple[list[BlockVersion], bool]:
        """A page of the block's history, newest first (versions below ``before``), and whether more remain."""
        return self._versioned_block(label).versions(before=before, limit=limit, max_bytes=max_bytes)

    def block_version(self, label: str, version: int) -> BlockVersion:
        """One stored version of the block; ``NotFoundError`` when it never existed or was pruned."""
        found = self._versioned_block(label).version(version)
        if found is None:
            raise NotFoundError(f'Block "{label}" has no stored version {version}')
        return found

    def revert_block(
        self, label: str, version: int, *, change: BlockChange, based_on_version: int | None = None
    ) -> ContextBlock:
        """Make ``version``'s content current again: itself a new version (the history is kept)."""
        old = self.block_version(label, version)
        return self.set_block(label, old.content, based_on_version=based_on_version, change=change)

    def stale_shared_blocks(self, frozen_prompt: str) -> list[str]:
        """Labels of shared blocks whose content as stored now is not what ``frozen_prompt`` shows.

        Read together (one round trip on PostgreSQL). A block's rendering (header with its
        token count, then its content) either is in the frozen prompt or the prompt is stale.
        """
        shared = [config for config in self._configs if config.scope != "session" and config.provider is not None]
        if not shared:
            return []
        known = _plan_reads(shared).finish()
        stale = []
        for index, config in enumerate(shared):
            current = self._read_block(config, known.get(index, NOT_READ))
            if render_block(current) not in frozen_prompt:
                stale.append(config.label)
        return stale

    def _keyed_provider(self, label: str, *, skill: bool) -> ContextProvider:
        self.ensure_loaded()
        provider = self._provider(label)
        if skill and not is_skill_provider(provider):
            raise ValidationError(f'Block "{label}" is not a skill provider')
        if not skill and not is_search_provider(provider):
            raise ValidationError(f'Block "{label}" is not a search provider')
        if not is_writable_provider(provider):
            raise ReadOnlyBlockError(f'Block "{label}" does not support writes')
        return cast("ContextProvider", provider)

    def _update_content(self, label: str, content: str) -> None:
        block = self._blocks.get(label)
        if block is not None:
            self._blocks[label] = replace(block, content=content, tokens=estimate_string_tokens(content))

    def set_skill(self, label: str, key: str, content: str, description: str | None = None) -> None:
        """Store one skill document, then refresh the block's listing from the provider."""
        limits = self.limits
        limits.check_content(content, f'skill "{key}"', limits.max_skill_bytes)
        if description is not None:
            check_text(description, "skill description", max_chars=limits.max_skill_description_chars)
        provider = self._keyed_provider(label, skill=True)
        _provider_set(provider)(key, content, description)
        listing = provider.get()
        if listing:  # an empty listing keeps the previous content, as the reference does
            self._update_content(label, listing)

    def set_search_entry(self, label: str, key: str, content: str) -> None:
        """Index one entry, then refresh the block's summary from the provider."""
        self.limits.check_content(content, f'entry "{key}" of block "{label}"', self.limits.max_entry_bytes)
        provider = self._keyed_provider(label, skill=False)
        _provider_set(provider)(key, content)
        self._update_content(label, provider.get() or "")

    # -- skills and search ----------------------------------------------------------------------

    def load_skill(self, label: str, key: str) -> str | None:
        """Fetch a skill's body; only a found document (``""`` included) counts as loaded."""
        self.ensure_loaded()
        provider = self._provider(label)
        if not is_skill_provider(provider):
            raise ValidationError(f'Block "{label}" is not a skill provider')
        content = cast("SkillProvider", provider).load(key)
        if content is not None:
            sid = skill_id(label, key)
            if sid not in self._loaded_skills:
                self._loaded_skills[sid] = None
                self._notify_loaded_skills()
        return content

    def unload_skill(self, label: str, key: str) -> bool:
        """Stop tracking a loaded skill and fire the unload callback; False if it was not loaded."""
        sid = skill_id(label, key)
        if sid not in self._loaded_skills:
            return False
        del self._loaded_skills[sid]
        self._notify_loaded_skills()
        if self.on_unload is not None:
            self.on_unload(label, key)
        return True

    def loaded_skill_keys(self) -> set[str]:
        """A copy of the loaded-skill ids (``"label:key"``); mutate through the methods only."""
        return set(self._loaded_skills)

    def loaded_skill_ids(self) -> list[str]:
        """Loaded-skill ids in the order they were loaded."""
        return list(self._loaded_skills)

    def restore_loaded_skills(self, ids: Iterable[str], *, notify: bool = True) -> None:
        """Replace the whole loaded-skill set (for example from persisted state).

        Pass ``notify=False`` when the ids come from the store the listener writes to.
        """
        self._replace_loaded_skills(ids, notify=notify)

    def clear_skill_state(self) -> None:
        """Forget every loaded skill (used when the conversation is cleared)."""
        self._replace_loaded_skills([])

    def _replace_loaded_skills(self, ids: Iterable[str], *, notify: bool = True) -> None:
        new = dict.fromkeys(ids)
        if list(new) == list(self._loaded_skills):
            return
        self._loaded_skills = new
        if notify:
            self._notify_loaded_skills()

    def _notify_loaded_skills(self) -> None:
        if self.on_loaded_skills_changed is not None:
            self.on_loaded_skills_changed(set(self._loaded_skills))

    def search_context(self, label: str, query: str) -> str | None:
        """Run the block's own search; ``None`` means no hits."""
        self.ensure_loaded()
        provider = self._provider(label)
        if not is_search_provider(provider):
            raise ValidationError(f'Block "{label}" is not a search provider')
        return cast("SearchProvider", provider).search(query)

    # -- system prompt ----------------------------------------------------------------------------

    def to_system_prompt(self) -> str:
        """The cached snapshot, rendering it the first time."""
        if not self._loaded:
            raise ValidationError("Context blocks not loaded. Call load() first.")
        if self._snapshot is None:
            self._snapshot = render_prompt(self._blocks.values())
        return self._snapshot

    def refresh_snapshot(self) -> str:
        """Re-render from the blocks in memory (providers are not re-read) and cache it."""
        self._snapshot = render_prompt(self._blocks.values())
        return self._snapshot

    def freeze_system_prompt(self) -> str:
        """The prompt to send: the stored one if any, else render once and persist.

        A stored ``""`` is a stored value. On a store hit nothing is loaded. When the
        store offers ``set_if_absent(prompt) -> str`` it is used, so that the first
        of several concurrent freezes wins and every caller returns the winner.
        """
        store = self.prompt_store
        if store is not None:
            stored = self._read_stored_prompt(store)
            if stored is not None:
                self._frozen = stored
                return stored
        self.ensure_loaded()
        prompt = self.to_system_prompt()
        if store is not None:
            set_if_absent = getattr(store, "set_if_absent", None)
            if callable(set_if_absent):
                winner = set_if_absent(prompt)
                if isinstance(winner, str) and winner != prompt:
                    self._snapshot = prompt = winner
            else:
                store.set(prompt)
        return prompt

    def _read_stored_prompt(self, store: WritableContextProvider) -> str | None:
        """The stored prompt; when there is none, the blocks are read in the same round trip and loaded.

        A new session's first request must render its prompt, so on PostgreSQL the stored
        prompt and the block reads go in one statement, the blocks only read when no prompt is
        stored: 2 round trips to freeze instead of 3, and still 1 when a prompt is stored.
        That needs the store and the blocks to offer single-value reads on one channel with
        ``read_when_missing``; otherwise the prompt is read alone, as before. The blocks'
        providers are ``init``-ed even when a prompt is stored (``init`` is cheap and is called
        again before any later read).
        """
        prompt_read = getattr(store, "block_read", None)
        if self._loaded or not callable(prompt_read):
            return store.get()
        first = prompt_read()
        read_when_missing = getattr(first.channel, "read_when_missing", None) if isinstance(first, BlockRead) else None
        if not isinstance(first, BlockRead) or not first.single_value or not callable(read_when_missing):
            return store.get()
        plan = _plan_reads(self._configs)
        indexes = [index for index, read in plan.reads.items() if read.channel is first.channel and read.single_value]
        rows, answers = read_when_missing(first.statement, [plan.reads[index].statement for index in indexes])
        stored = first.finish(rows)
        if stored is not None or answers is None:
            return stored
        plan.answer(indexes, answers)
        self._load_with(plan.finish())
        return None

    def refresh_system_prompt(self) -> str:
        """Re-read every provider (``init`` runs again), re-render, cache and persist."""
        self._loaded = False
        self.load()
        prompt = self.refresh_snapshot()
        if self.prompt_store is not None:
            self.prompt_store.set(prompt)
        return prompt

    def system_prompt_for_estimate(self) -> str:
        """The prompt as a token estimate should see it; never persists anything.

        The frozen prompt this object read or wrote is remembered, so the estimate after
        every append does not re-read the prompt store (a round trip on PostgreSQL). So is
        its absence: a session whose prompt is never frozen has its blocks rendered (read
        with the store, in one round trip, the first time), not the store asked again
        after every append. A prompt another process freezes later is what this render
        would have been unless the blocks changed there, and the figure is an estimate.
        """
        if self._snapshot is not None:
            return self._snapshot
        if self._frozen is not None:
            return self._frozen
        if self.prompt_store is not None and not self._estimate_found_none:
            stored = self._read_stored_prompt(self.prompt_store)
            if stored is not None:
                self._frozen = stored
                return stored
            self._estimate_found_none = True
        self.ensure_loaded()
        return render_prompt(self._blocks.values())


__all__ = [
    "HELD",
    "ChangeSource",
    "ContextBlocks",
    "ContextConfig",
    "LoadedSkillsListener",
    "UnloadCallback",
    "is_versioned_provider",
    "skill_id",
]
