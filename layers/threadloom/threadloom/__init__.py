"""Threadloom: persistent, tree-structured conversation memory for AI agents.

The core (sessions, context blocks, tools, compaction, the SQLite default) imports
only the standard library. Backends and providers that need third-party packages
(PostgreSQL via pg8000, S3 and DynamoDB via boto3) are imported on first access.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from threadloom.core.context import ContextBlocks, ContextConfig
from threadloom.core.manager import SessionManager
from threadloom.core.session import Session
from threadloom.errors import (
    BlockLimitError,
    CompactionError,
    ConflictError,
    NotFoundError,
    ReadOnlyBlockError,
    SessionBusyError,
    SkillStoreError,
    StorageError,
    StorageTimeoutError,
    StorageUnavailableError,
    ThreadloomError,
    ValidationError,
)
from threadloom.providers.local_skills import LocalSkillProvider
from threadloom.providers.protocols import (
    ContextProvider,
    SearchProvider,
    SessionProvider,
    SkillProvider,
    WritableContextProvider,
    is_search_provider,
    is_skill_provider,
    is_writable_provider,
)
from threadloom.records import (
    OMITTED,
    AppendResult,
    CompactResult,
    ContextBlock,
    Message,
    SearchResult,
    SessionInfo,
    StoredCompaction,
    TokenCountInput,
)
from threadloom.storage.sqlite.store import SqliteContextProvider, SqliteSearchProvider, SqliteStore
from threadloom.tools.base import Tool

if TYPE_CHECKING:
    from threadloom.providers.dynamodb_prompt_store import DynamoDBPromptStore
    from threadloom.providers.s3_skills import S3SkillProvider
    from threadloom.storage.postgres.store import PostgresContextProvider, PostgresSearchProvider, PostgresStore

_LAZY = {
    "PostgresStore": "threadloom.storage.postgres.store",
    "PostgresContextProvider": "threadloom.storage.postgres.store",
    "PostgresSearchProvider": "threadloom.storage.postgres.store",
    "S3SkillProvider": "threadloom.providers.s3_skills",
    "DynamoDBPromptStore": "threadloom.providers.dynamodb_prompt_store",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'threadloom' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


__all__ = [
    "OMITTED",
    "AppendResult",
    "BlockLimitError",
    "CompactResult",
    "CompactionError",
    "ConflictError",
    "ContextBlock",
    "ContextBlocks",
    "ContextConfig",
    "ContextProvider",
    "DynamoDBPromptStore",
    "LocalSkillProvider",
    "Message",
    "NotFoundError",
    "PostgresContextProvider",
    "PostgresSearchProvider",
    "PostgresStore",
    "ReadOnlyBlockError",
    "S3SkillProvider",
    "SearchProvider",
    "SearchResult",
    "Session",
    "SessionInfo",
    "SessionManager",
    "SessionBusyError",
    "SessionProvider",
    "SkillProvider",
    "SkillStoreError",
    "SqliteContextProvider",
    "SqliteSearchProvider",
    "SqliteStore",
    "StorageError",
    "StorageTimeoutError",
    "StorageUnavailableError",
    "StoredCompaction",
    "ThreadloomError",
    "TokenCountInput",
    "Tool",
    "ValidationError",
    "WritableContextProvider",
    "is_search_provider",
    "is_skill_provider",
    "is_writable_provider",
]
