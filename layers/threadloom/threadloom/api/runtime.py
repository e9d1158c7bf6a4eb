"""Process-wide wiring of the app: settings from the environment, the store, one manager per tenant.

Lambda keeps an execution environment alive between invocations, so everything here is
built on first use and cached for the life of the process; importing this module does
no I/O and reads no environment variable (``get_runtime()`` does, once).

Over 400 lines because it is the one place that reads the settings and wires every optional part
(store, queue, publisher, skills) from them.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import json
import logging
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from threadloom.core.manager import SessionManager
from threadloom.errors import NotFoundError, ValidationError
from threadloom.limits import shown
from threadloom.providers.protocols import is_search_entry_store
from threadloom.records import HistoryPolicy

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from threadloom.api.background import BackgroundJobs
    from threadloom.api.profile import Profile
    from threadloom.compaction.function import CompactFunction
    from threadloom.compaction.queue import CompactionQueue, CompactionRequest
    from threadloom.lifecycle.protocols import DerivedDataEraser
    from threadloom.limits import Limits
    from threadloom.live.publisher import StatusPublisher
    from threadloom.providers.protocols import ContextProvider, SearchEntryStore, WritableContextProvider

logger = logging.getLogger(__name__)

Backend = Literal["sqlite", "postgres"]
CompactionMode = Literal["sqs", "in-process", "inline"]
LivePublishing = Literal["queue", "direct", "none"]
DEFAULT_SQLITE_PATH = "/tmp/threadloom.db"  # Lambda's only writable folder


@dataclass(frozen=True, slots=True)
class Settings:
    """Deployment settings, read once from ``THREADLOOM_*`` variables (see ``events/env.local.json``)."""

    backend: Backend = "sqlite"
    sqlite_path: str = DEFAULT_SQLITE_PATH
    #: ``normal`` (WAL: survives a crash of the process) or ``full`` (also power loss: every commit synced).
    sqlite_synchronous: Literal["normal", "full"] = "normal"
    skills_bucket: str | None = None
    skills_prefix: str = ""
    skills_dir: str | None = None
    prompt_table: str | None = None
    compaction_queue_url: str | None = None
    compaction_mode: CompactionMode = "in-process"
    tenant_claim: str = "sub"
    profile_path: str | None = None
    idempotency_table: str | None = None
    connections_table: str | None = None
    websocket_endpoint: str | None = None
    #: How live events leave the process on AWS: ``queue`` (hand-off to the publisher function, for functions in
    #: a VPC without a NAT), ``direct`` (post through the Management API) or ``none``; see docs/live-status.md.
    live_publishing: LivePublishing = "none"
    live_queue_url: str | None = None
    export_bucket: str | None = None
    export_inline_bytes: int = 5 * 1024 * 1024
    admin_scope: str = "threadloom/admin"
    #: The scope a service token needs to create a session for another user (``subjectId``) when
    #: the profile has subject blocks: that user's shared memory is then what the session reads.
    act_for_users_scope: str = "threadloom/act-for-users"
    subject_claim: str = "sub"
    #: False in the deployed profile: the migrations custom resource migrates at deploy time, requests never do.
    db_migrate: bool = True
    #: The tenant of requests that reach the handler without any authorizer context; only ever set under
    #: ``sam local`` (AWS_SAM_LOCAL=true), which cannot run the HTTP API's JWT authorizer.
    local_tenant: str | None = None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """Read the settings; bad values raise ``ValidationError`` naming the variable."""
        env = os.environ if environ is None else environ

        def get(name: str) -> str | None:
            value = env.get(name, "").strip()
            return value or None

        backend = (get("THREADLOOM_BACKEND") or "sqlite").lower()
        if backend not in ("sqlite", "postgres"):
            raise ValidationError(f"THREADLOOM_BACKEND must be sqlite or postgres, not {backend!r}")
        queue_url = get("THREADLOOM_COMPACTION_QUEUE_URL")
        mode = (get("THREADLOOM_COMPACTION_MODE") or ("sqs" if queue_url else "in-process")).lower()
        if mode not in ("sqs", "in-process", "inline"):
            raise ValidationError(f"THREADLOOM_COMPACTION_MODE must be sqs, in-process or inline, not {mode!r}")
        if mode == "sqs" and not queue_url:
            raise ValidationError("THREADLOOM_COMPACTION_MODE=sqs needs THREADLOOM_COMPACTION_QUEUE_URL")
        live_queue_url = get("THREADLOOM_LIVE_QUEUE_URL")
        endpoint = get("THREADLOOM_WEBSOCKET_ENDPOINT")
        default_live = "queue" if live_queue_url else "direct" if endpoint else "none"
        live = (get("THREADLOOM_LIVE_PUBLISHING") or default_live).lower()
        if live not in ("queue", "direct", "none"):
            raise ValidationError(f"THREADLOOM_LIVE_PUBLISHING must be queue, direct or none, not {live!r}")
        if live == "queue" and not live_queue_url:
            raise ValidationError("THREADLOOM_LIVE_PUBLISHING=queue needs THREADLOOM_LIVE_QUEUE_URL")
        if live == "direct" and not endpoint:
            raise ValidationError("THREADLOOM_LIVE_PUBLISHING=direct needs THREADLOOM_WEBSOCKET_ENDPOINT")
        sam_local = env.get("AWS_SAM_LOCAL") == "true"
        if backend == "sqlite" and env.get("AWS_LAMBDA_FUNCTION_NAME") and not sam_local:
            raise ValidationError(
                "THREADLOOM_BACKEND=sqlite on Lambda would give every instance its own copy of the data in /tmp; "
                "deployed functions run PostgreSQL (THREADLOOM_BACKEND=postgres, see docs/deploy.md)"
            )
        synchronous = (get("THREADLOOM_SQLITE_SYNCHRONOUS") or "normal").lower()
        if synchronous not in ("normal", "full"):
            raise ValidationError(f"THREADLOOM_SQLITE_SYNCHRONOUS must be normal or full, not {synchronous!r}")
        migrate_text = (get("THREADLOOM_DB_MIGRATE") or "true").lower()
        if migrate_text not in ("true", "false"):
            raise ValidationError(f"THREADLOOM_DB_MIGRATE must be true or false, not {migrate_text!r}")
        return cls(
            backend=backend,  # type: ignore[arg-type]
            sqlite_path=get("THREADLOOM_SQLITE_PATH") or DEFAULT_SQLITE_PATH,
            sqlite_synchronous=synchronous,  # type: ignore[arg-type]
            skills_bucket=get("THREADLOOM_SKILLS_BUCKET"),
            skills_prefix=env.get("THREADLOOM_SKILLS_PREFIX", ""),
            skills_dir=get("THREADLOOM_SKILLS_DIR"),
            prompt_table=get("THREADLOOM_PROMPT_TABLE"),
            compaction_queue_url=queue_url,
            compaction_mode=mode,  # type: ignore[arg-type]
            tenant_claim=get("THREADLOOM_TENANT_CLAIM") or "sub",
            profile_path=get("THREADLOOM_PROFILE"),
            idempotency_table=get("THREADLOOM_IDEMPOTENCY_TABLE"),
            connections_table=get("THREADLOOM_CONNECTIONS_TABLE"),
            websocket_endpoint=endpoint,
            live_publishing=live,  # type: ignore[arg-type]
            live_queue_url=live_queue_url,
            export_bucket=get("THREADLOOM_EXPORT_BUCKET"),
            export_inline_bytes=_positive_int(get("THREADLOOM_EXPORT_INLINE_BYTES"), 5 * 1024 * 1024),
            admin_scope=get("THREADLOOM_ADMIN_SCOPE") or "threadloom/admin",
            act_for_users_scope=get("THREADLOOM_ACT_FOR_USERS_SCOPE") or "threadloom/act-for-users",
            subject_claim=get("THREADLOOM_SUBJECT_CLAIM") or "sub",
            db_migrate=migrate_text == "true",
            local_tenant=get("THREADLOOM_LOCAL_TENANT") if sam_local else None,
        )


def _positive_int(text: str | None, default: int) -> int:
    if text is None:
        return default
    if not text.isdigit() or int(text) < 1:
        raise ValidationError(f"Expected a positive integer, not {text!r}")
    return int(text)


class StaticTextProvider:
    """A read-only block whose content is fixed by the profile."""

    def __init__(self, content: str) -> None:
        self._content = content

    def get(self) -> str | None:
        return self._content


def request_key(request: CompactionRequest) -> str:
    """The fencing key of a queued request: SHA-256 of ``(namespace, session_id, leaf_id)`` (as the SQS dedup id)."""
    return hashlib.sha256(json.dumps(list(request.dedup_key)).encode("utf-8")).hexdigest()


class Runtime:
    """The store, the queue and the per-tenant managers of one process.

    Parameters
    ----------
    settings:
        Deployment settings (``Settings.from_env()`` by default).
    profile:
        The deployment profile (read from ``settings.profile_path`` or the bundled default when omitted).
    store:
        A ready store, for tests; otherwise built from the settings on first use.
    queue:
        A ready compaction queue, for tests; otherwise built from the settings.
    publisher:
        Where live status events go (the local server's hub, the API Gateway publisher); by
        default built from the settings, publishing nowhere when no live channel is configured.
    """

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        profile: Profile | None = None,
        store: Any = None,
        queue: CompactionQueue | None = None,
        publisher: StatusPublisher | None = None,
    ) -> None:
        self.settings = settings if settings is not None else Settings.from_env()
        self._profile = profile
        self._store = store
        self._given_queue = queue
        self._queue: CompactionQueue | None = None
        self._queue_built = False
        self._publisher = publisher
        self._managers: dict[str, SessionManager] = {}
        self._skills: ContextProvider | None = None
        self._compact_fn: CompactFunction | None = None
        self._lock = threading.RLock()
        self._limits: Limits | None = None
        self._jobs: BackgroundJobs | None = None

    # ------------------------------------------------------------ components

    @property
    def profile(self) -> Profile:
        if self._profile is None:
            from threadloom.api.profile import load_profile  # Pydantic models and YAML: read once, on first use

            self._profile = load_profile(self.settings.profile_path)
        return self._profile

    @property
    def limits(self) -> Limits:
        """The profile's limits table, enforced by every manager this runtime builds."""
        if self._limits is None:
            self._limits = self.profile.limits.to_limits()
        return self._limits

    @property
    def store(self) -> Any:
        """The SQLite or PostgreSQL store (Postgres imported only when selected)."""
        with self._lock:
            if self._store is None:
                self._store = self._build_store()
            return self._store

    def _build_store(self) -> Any:
        if self.settings.backend == "postgres":
            module = importlib.import_module("threadloom.storage.postgres.store")
            return module.PostgresStore.from_environment(auto_migrate=self.settings.db_migrate)
        from threadloom.storage.sqlite.store import SqliteStore

        Path(self.settings.sqlite_path).parent.mkdir(parents=True, exist_ok=True)
        return SqliteStore(self.settings.sqlite_path, synchronous=self.settings.sqlite_synchronous)

    @property
    def queue(self) -> CompactionQueue | None:
        """SQS FIFO in Lambda, a background thread locally, or None (``inline``: compact on the request).

        Requests are tracked (``queued`` … ``done``) when the store keeps a request log.
        """
        with self._lock:
            if not self._queue_built:
                inner = self._given_queue if self._given_queue is not None else self._build_queue()
                self._queue = self._tracked(inner)
                self._queue_built = True
            return self._queue

    def _tracked(self, inner: CompactionQueue | None) -> CompactionQueue | None:
        store = self.store
        if inner is None or not callable(getattr(store, "compaction_requests", None)):
            return inner
        from threadloom.compaction.tracking import TrackedCompactionQueue

        return TrackedCompactionQueue(inner, store.compaction_requests)

    def _build_queue(self) -> CompactionQueue | None:
        mode = self.settings.compaction_mode
        if mode == "sqs":
            from threadloom.compaction.sqs_queue import SqsCompactionQueue

            return SqsCompactionQueue(self.settings.compaction_queue_url or "")
        if mode == "inline":
            return None
        from threadloom.compaction.queue import InProcessCompactionQueue

        return InProcessCompactionQueue(self._compaction_handler())

    @property
    def publisher(self) -> StatusPublisher:
        """The live-status publisher every tenant's manager publishes through after each write."""
        with self._lock:
            if self._publisher is None:
                self._publisher = self._build_publisher()
            return self._publisher

    def _build_publisher(self) -> StatusPublisher:
        """The hand-off to the publisher function, the direct Management API publisher, or one publishing nowhere."""
        settings = self.settings
        if settings.live_publishing != "none":
            if not settings.connections_table:
                raise ValidationError(
                    f"THREADLOOM_LIVE_PUBLISHING={settings.live_publishing} needs THREADLOOM_CONNECTIONS_TABLE"
                )
            from threadloom.live.aws.connections import ConnectionsTable

            connections = ConnectionsTable(settings.connections_table)
            if settings.live_publishing == "queue":
                from threadloom.live.aws.queue_publisher import QueuePublisher

                return QueuePublisher(connections, settings.live_queue_url or "")
            from threadloom.live.aws.publisher import ManagementApiPublisher

            return ManagementApiPublisher(connections, settings.websocket_endpoint or "")
        from threadloom.live.publisher import NullPublisher

        return NullPublisher()

    @property
    def jobs(self) -> BackgroundJobs:
        """What the queue's worker runs per request kind: compactions and reflections (``api/background.py``)."""
        with self._lock:
            if self._jobs is None:
                from threadloom.api.background import BackgroundJobs

                self._jobs = BackgroundJobs(self)
            return self._jobs

    def _compaction_handler(self) -> Callable[[CompactionRequest], object]:
        """The background jobs' handler when the worker module exists, else a direct fenced compaction."""
        if importlib.util.find_spec("threadloom.core.compaction_worker") is not None:
            return self.jobs.handle

        def handle(request: CompactionRequest) -> None:
            manager = self.manager(request.namespace)
            if manager.get(request.session_id) is None:
                return
            session = manager.get_session(request.session_id)
            session.compact(leaf_id=request.leaf_id, request_key=request_key(request), registered=True)

        return handle

    def compact_function(self) -> CompactFunction | None:
        spec = self.profile.compaction
        if not spec.enabled:
            return None
        if self._compact_fn is None:
            from threadloom.compaction.function import create_compact_function

            summarizer: Callable[[str], str]
            if spec.summarizer.kind == "bedrock":
                from threadloom.compaction.summarizers.bedrock import BedrockSummarizer

                summarizer = BedrockSummarizer(spec.summarizer.model_id or "", max_tokens=spec.summarizer.max_tokens)
            else:
                from threadloom.compaction.summarizers.offline import ExtractiveSummarizer

                summarizer = ExtractiveSummarizer()
            self._compact_fn = create_compact_function(
                summarizer,
                protect_head=spec.protect_head,
                tail_token_budget=spec.tail_token_budget,
                min_tail_messages=spec.min_tail_messages,
            )
        return self._compact_fn

    # --------------------------------------------------------------- tenants

    def manager(self, tenant: str) -> SessionManager:
        """The configured manager of ``tenant`` (its namespace), built once per process."""
        with self._lock:
            manager = self._managers.get(tenant)
            if manager is None:
                manager = self._build_manager(tenant)
                self._managers[tenant] = manager
            return manager

    def knowledge(self, tenant: str, label: str) -> SearchEntryStore:
        """The entries of the profile's searchable block ``label`` in ``tenant``, without a whole manager.

        For an operator's one-shot command (``threadloom knowledge``); a request goes through the
        tenant's manager, which also drops the sessions it holds loaded when an entry goes.
        """
        for block in self.profile.blocks:
            if block.kind == "search" and block.label == label:
                provider = self._search_provider(tenant)
                if is_search_entry_store(provider):
                    entries: SearchEntryStore = provider
                    entries.init(label)
                    return entries
        raise NotFoundError(f"No searchable block {shown(label)} in this namespace")

    def _search_provider(self, tenant: str) -> Any:
        return self.store.search_provider(scope=tenant, max_entries=self.limits.max_entries_per_tenant)

    def _build_manager(self, tenant: str) -> SessionManager:
        profile = self.profile
        store = self.store
        manager = SessionManager.create(store, namespace=tenant).with_limits(self.limits)
        for block in profile.blocks:
            provider: ContextProvider | None = None
            if block.kind == "static":
                provider = StaticTextProvider(block.content)
            elif block.kind == "skills":
                provider = self._skills_for(block.keys, block.prefix, tenant)
                if provider is None:
                    logger.warning("Skills block %r has no skill store configured; it stays empty", block.label)
                    provider = StaticTextProvider("")
            elif block.kind == "search":
                provider = self._search_provider(tenant)
            max_tokens = block.max_tokens if block.kind == "writable" else None
            scope = block.scope if block.kind == "writable" else "session"
            manager.with_context(
                block.label, description=block.description, max_tokens=max_tokens, provider=provider, scope=scope
            )
        history = profile.block_history
        manager.with_block_history(HistoryPolicy(keep_versions=history.keep_versions, keep_days=history.keep_days))
        cache = profile.prompt_cache
        if cache.enabled:
            if cache.backend == "dynamodb":
                manager.with_cached_prompt(per_session=self._dynamodb_prompt_factory(tenant))
            else:
                manager.with_cached_prompt()
        if profile.searchable_history:
            manager.with_searchable_history(profile.searchable_history)
        compact_fn = self.compact_function()
        if compact_fn is not None:
            manager.on_compaction(compact_fn)
            if profile.compaction.threshold is not None:
                manager.compact_after(profile.compaction.threshold)
            queue = self.queue
            if queue is not None:
                manager.with_compaction_queue(queue)
        publisher = self.publisher
        if not _publishes_nowhere(publisher):
            from threadloom.live.publisher import attach_publisher

            attach_publisher(manager, publisher)
        return manager

    def _skills_for(self, keys: list[str] | None, prefix: str | None, tenant: str) -> ContextProvider | None:
        """The tenant's skills: its own namespace over the operator catalogue (see ``tenant_skills``)."""
        from threadloom.providers.tenant_skills import TenantSkillProvider, tenant_namespace

        settings = self.settings
        own_prefix = tenant_namespace(tenant) + (prefix or "")
        if settings.skills_bucket:
            from threadloom.providers.s3_skills import S3SkillProvider

            root = settings.skills_prefix
            catalogue = S3SkillProvider(settings.skills_bucket, prefix=root + (prefix or ""), keys=keys)
            own = S3SkillProvider(settings.skills_bucket, prefix=root + own_prefix)
            return TenantSkillProvider(own, catalogue, limits=self.limits)
        if settings.skills_dir:
            from threadloom.providers.local_skills import LocalSkillProvider

            root_dir = Path(settings.skills_dir)
            local_catalogue = LocalSkillProvider(root_dir / prefix if prefix else root_dir, keys=keys)
            local_own = LocalSkillProvider(root_dir / own_prefix)
            return TenantSkillProvider(local_own, local_catalogue, limits=self.limits)
        return None

    def _dynamodb_prompt_factory(self, tenant: str) -> Callable[[str], WritableContextProvider]:
        table = self.settings.prompt_table
        if not table:
            raise ValidationError("prompt_cache.backend 'dynamodb' needs THREADLOOM_PROMPT_TABLE")
        ttl = self.profile.prompt_cache.ttl_seconds

        def factory(session_id: str) -> WritableContextProvider:
            from threadloom.providers.dynamodb_prompt_store import DynamoDBPromptStore

            return DynamoDBPromptStore(table, f"{tenant}#{session_id}", ttl_seconds=ttl)

        return factory

    # ------------------------------------------------------------- lifecycle

    def lifecycle_erasers(self) -> list[DerivedDataEraser]:
        """What a removed session leaves outside the database here: prompt cache, idempotency records, exports."""
        from threadloom.lifecycle.derived import DynamoDBPromptCacheEraser, IdempotencyRecordEraser, S3ExportEraser

        erasers: list[DerivedDataEraser] = []
        settings = self.settings
        if (
            self.profile.prompt_cache.enabled
            and self.profile.prompt_cache.backend == "dynamodb"
            and settings.prompt_table
        ):
            erasers.append(DynamoDBPromptCacheEraser(settings.prompt_table))
        if settings.idempotency_table:
            erasers.append(IdempotencyRecordEraser(settings.idempotency_table))
        if settings.export_bucket:
            erasers.append(S3ExportEraser(settings.export_bucket))
        return erasers

    # ---------------------------------------------------------------- health

    def storage_reachable(self) -> bool:
        """One trivial read against the store (used by ``GET /health``)."""
        try:
            self.store.registry("__health__").count()
        except Exception:
            logger.exception("Storage health check failed")
            return False
        return True


def _publishes_nowhere(publisher: StatusPublisher) -> bool:
    """A NullPublisher needs no listener (and so no token estimate after writes that do not need one)."""
    from threadloom.live.publisher import NullPublisher

    return isinstance(publisher, NullPublisher)


_runtime: Runtime | None = None
_runtime_lock = threading.Lock()


def get_runtime() -> Runtime:
    """The process-wide runtime, built from the environment on first call."""
    global _runtime  # noqa: PLW0603 - one runtime per Lambda execution environment
    with _runtime_lock:
        if _runtime is None:
            _runtime = Runtime()
        return _runtime


def set_runtime(runtime: Runtime | None) -> None:
    """Replace (or with None, forget) the process-wide runtime; for tests and the local server."""
    global _runtime  # noqa: PLW0603
    with _runtime_lock:
        _runtime = runtime


__all__ = ["Runtime", "Settings", "StaticTextProvider", "get_runtime", "request_key", "set_runtime"]
