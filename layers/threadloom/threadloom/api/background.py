"""What the compaction queue's worker runs for each kind of request: a compaction, or a reflection.

One queue carries both (SQS FIFO in the cloud, one group per session, so a session's jobs run in order; a thread
locally). A compaction that stored an overlay queues a reflection of the same session when the profile's
``reflection.after_compaction`` is on, and :meth:`BackgroundJobs.sweep_idle` queues the sessions that went idle
(``reflection.idle_minutes``). The reflection worker is built from the profile on first use.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any, Protocol

from threadloom.compaction.queue import CompactionRequest
from threadloom.core.compaction_worker import CompactionOutcome, CompactionWorker

if TYPE_CHECKING:
    from datetime import datetime

    from threadloom.api.profile import Profile
    from threadloom.compaction.queue import CompactionQueue
    from threadloom.core.manager import SessionManager
    from threadloom.reflection.facts import FactExtractor
    from threadloom.reflection.worker import ReflectionWorker

logger = logging.getLogger(__name__)

REFLECTION_DISABLED = "reflection_disabled"
"""The outcome of a reflection request that reaches a deployment whose profile has reflection off."""


class JobRuntime(Protocol):
    """What the jobs need of the runtime (``api.runtime.Runtime``, which builds them)."""

    @property
    def profile(self) -> Profile: ...

    @property
    def queue(self) -> CompactionQueue | None: ...

    @property
    def store(self) -> Any: ...

    def manager(self, tenant: str) -> SessionManager: ...


class BackgroundJobs:
    """The queue's handler over one runtime: dispatches by ``request.kind``."""

    def __init__(self, runtime: JobRuntime, compaction: CompactionWorker | None = None) -> None:
        self._runtime = runtime
        self.compaction = compaction or CompactionWorker(runtime.manager)
        self._reflection: ReflectionWorker | None = None
        self._lock = threading.Lock()

    def __call__(self, request: CompactionRequest) -> str:
        return self.handle(request)

    def handle(self, request: CompactionRequest) -> str:
        """Run the request; the outcome's name. Raises when the job failed, so the queue retries it."""
        if request.kind == "reflection":
            worker = self.reflection_worker()
            if worker is None:
                logger.info("Reflection request for session %r dropped: reflection is off", request.session_id)
                return REFLECTION_DISABLED
            return worker.handle(request).value
        outcome = self.compaction.handle(request)
        if outcome is CompactionOutcome.COMPACTED:
            self.reflect_after_compaction(request)
        return outcome.value

    def reflect_after_compaction(self, request: CompactionRequest) -> None:
        """Queue a reflection of the session a compaction just shortened, when the profile asks for it."""
        spec = self._runtime.profile.reflection
        if not (spec.enabled and spec.after_compaction):
            return
        queue = self._runtime.queue
        if queue is not None:
            queue.enqueue(CompactionRequest.create(request.namespace, request.session_id, None, kind="reflection"))

    def sweep_idle(self, every_minutes: int, now: datetime | None = None, *, idle_minutes: int | None = None) -> int:
        """Queue reflections of the sessions that went idle in the last ``every_minutes`` (``idle_minutes`` of quiet,
        else the profile's ``reflection.idle_minutes``); how many. Nothing when reflection, its idle threshold or the
        queue is off. The deployed schedule passes its stack parameter as ``idle_minutes``."""
        spec = self._runtime.profile.reflection
        idle_minutes = idle_minutes if idle_minutes is not None else spec.idle_minutes
        if not spec.enabled or idle_minutes is None:
            return 0
        queue = self._runtime.queue
        sweep = getattr(self._runtime.store, "reflection_sweep", None)
        if queue is None or not callable(sweep):
            return 0
        from threadloom.reflection.idle import queue_idle_reflections

        queued = queue_idle_reflections(sweep(), queue, idle_minutes=idle_minutes, every_minutes=every_minutes, now=now)
        if queued:
            logger.info("Queued reflections of %d idle sessions", len(queued))
        return len(queued)

    def reflection_worker(self) -> ReflectionWorker | None:
        """The worker the profile describes (None when reflection is off), built once."""
        spec = self._runtime.profile.reflection
        if not spec.enabled:
            return None
        with self._lock:
            if self._reflection is None:
                from threadloom.reflection.worker import ReflectionSettings, ReflectionWorker

                settings = ReflectionSettings(spec.block, spec.approval == "required", spec.max_messages)
                self._reflection = ReflectionWorker(self._runtime.manager, self._extractor(), settings)
            return self._reflection

    def _extractor(self) -> FactExtractor:
        spec = self._runtime.profile.reflection.extractor
        if spec.kind == "bedrock":
            from threadloom.reflection.bedrock import BedrockFactExtractor

            return BedrockFactExtractor(spec.model_id or "", max_tokens=spec.max_tokens)
        from threadloom.reflection.offline import SelfStatementExtractor

        return SelfStatementExtractor()


__all__ = ["REFLECTION_DISABLED", "BackgroundJobs", "JobRuntime"]
