"""Threadloom: persistent, tree-structured conversation memory for AI agents.

The core (sessions, context blocks, tools, compaction) imports only the standard library.
Storage backends and providers are imported on first access: the SQLite default, PostgreSQL
(pg8000), S3 and DynamoDB (boto3), so a Lambda function loads only the backend it is configured
for (see ``bench/cold_start.py``).
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
from threadloom.tools.base import Tool

if TYPE_CHECKING:
    from threadloom.providers.dynamodb_prompt_store import DynamoDBPromptStore
    from threadloom.providers.s3_skills import S3SkillProvider
    from threadloom.storage.postgres.store import PostgresContextProvider, PostgresSearchProvider, PostgresStore
    from threadloom.storage.sqlite.store import SqliteContextProvider, SqliteSearchProvider, SqliteStore

_LAZY = {
    "PostgresStore": "threadloom.storage.postgres.store",
    "PostgresContextProvider": "threadloom.storage.postgres.store",
    "PostgresSearchProvider": "threadloom.storage.postgres.store",
    "SqliteStore": "threadloom.storage.sqlite.store",
    "SqliteContextProvider": "threadloom.storage.sqlite.store",
    "SqliteSearchProvider": "threadloom.storage.sqlite.store",
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
