"""Threadloom as the memory of agent frameworks: the OpenAI Agents SDK, Strands and LangChain.

Each adapter takes a ``SessionManager`` (the library, in process) or a ``ThreadloomClient``
(the deployed API): both satisfy :class:`~threadloom.integrations.backend.ThreadloomBackend`.
The framework packages are optional extras and are imported only by their own module.
"""

from __future__ import annotations

from threadloom.integrations.backend import SessionView, ThreadloomBackend

__all__ = ["SessionView", "ThreadloomBackend"]
