"""A tracing provider that records nothing, for Powertools' Tracer when tracing is off.

Tracer's default provider is the X-Ray SDK's recorder, which Tracer imports even when tracing is
disabled (about 10-80 ms on a cold start, more when it builds its sampling client). With tracing off,
:mod:`threadloom.api.observability` hands Tracer this provider instead, so the X-Ray SDK is never loaded.
"""

from __future__ import annotations

from contextlib import asynccontextmanager, contextmanager
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.tracing.base import BaseProvider, BaseSegment

if TYPE_CHECKING:
    import numbers
    import traceback
    from collections.abc import AsyncGenerator, Generator, Sequence


class NullSegment(BaseSegment):
    """A (sub)segment that drops annotations, metadata and exceptions."""

    def close(self, end_time: int | None = None) -> None:
        return None

    def add_subsegment(self, subsegment: Any) -> None:
        return None

    def remove_subsegment(self, subsegment: Any) -> None:
        return None

    def put_annotation(self, key: str, value: str | numbers.Number | bool) -> None:
        return None

    def put_metadata(self, key: str, value: Any, namespace: str = "default") -> None:
        return None

    def add_exception(
        self, exception: BaseException, stack: list[traceback.StackSummary], remote: bool = False
    ) -> None:
        return None


class NullTracingProvider(BaseProvider):
    """Every subsegment is a :class:`NullSegment`; patching instruments nothing."""

    @contextmanager
    def in_subsegment(self, name: str | None = None, **kwargs: Any) -> Generator[BaseSegment, None, None]:
        yield NullSegment()

    @asynccontextmanager
    async def in_subsegment_async(self, name: str | None = None, **kwargs: Any) -> AsyncGenerator[BaseSegment, None]:
        yield NullSegment()

    def put_annotation(self, key: str, value: str | numbers.Number | bool) -> None:
        return None

    def put_metadata(self, key: str, value: Any, namespace: str = "default") -> None:
        return None

    def patch(self, modules: Sequence[str]) -> None:
        return None

    def patch_all(self) -> None:
        return None


__all__ = ["NullSegment", "NullTracingProvider"]
