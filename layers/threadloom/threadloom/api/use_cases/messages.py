"""Use cases of a session's messages: append, read, edit, delete, branches, latest leaf, clear.

Plain Python over a ``SessionManager``, so each is tested without events. Every session-level
call first checks that the session belongs to the manager's namespace: another tenant's
session is simply not found.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from threadloom.api.models import (
    AppendOut,
    BranchPage,
    LeafOut,
    MessageOut,
)
from threadloom.api.paging import (
    count_within_bytes,
    decode_cursor,
    encode_cursor,
    item_budget,
    page_size,
)
from threadloom.api.use_cases.common import require_message
from threadloom.errors import ConflictError, NotFoundError, ValidationError
from threadloom.records import OMITTED

if TYPE_CHECKING:
    from threadloom.api.models import AppendIn
    from threadloom.core.manager import SessionManager
    from threadloom.limits import Limits
    from threadloom.records import Message, Omitted


def append(manager: SessionManager, session_id: str, body: AppendIn, limits: Limits) -> tuple[AppendOut, bool]:
    """Append one message or a chain; returns the result and whether anything new was stored.

    A chain reports where its first message attached (``parentId``) and whether any of
    its messages was new (``inserted``); its ``expectedLeafId`` is checked under the write lock.
    """
    if (body.message is None) == (body.messages is None):
        raise ValidationError("Send exactly one of 'message' or 'messages'")
    parent: str | Omitted | None = body.parent_id if "parent_id" in body.model_fields_set else OMITTED
    # The tenant's check and the activity stamp go with the append (one round trip on PostgreSQL).
    if body.message is not None:
        result = manager.append_message(
            session_id, body.message.as_message(), parent, expected_leaf_id=body.expected_leaf_id
        )
        out = AppendOut(
            id=result.id,
            parent_id=result.parent_id,
            inserted=result.inserted,
            token_estimate=_estimate(manager, session_id, result.token_estimate),
            token_threshold=manager.get_session(session_id).token_threshold,
        )
        return out, result.inserted
    messages = [item.as_message() for item in body.messages or []]
    if len(messages) > limits.max_chain_messages:
        raise ValidationError(f"A chain holds at most {limits.max_chain_messages} messages per request")
    results = manager.append_chain(session_id, messages, parent, expected_leaf_id=body.expected_leaf_id)
    inserted = any(result.inserted for result in results)
    out = AppendOut(
        id=results[-1].id,
        parent_id=results[0].parent_id,
        inserted=inserted,
        ids=[result.id for result in results],
        token_estimate=_estimate(manager, session_id, results[-1].token_estimate if results else None),
        token_threshold=manager.get_session(session_id).token_threshold,
    )
    return out, inserted


def _estimate(manager: SessionManager, session_id: str, answered: int | None) -> int:
    """The estimate the append answered with, else one read now: checked again, since the session may
    have been deleted or opened again for another subject since the append (409, never their blocks)."""
    if answered is not None:
        return answered
    with manager.checked_session(session_id) as session:
        return session.estimate_tokens()


def get_message(manager: SessionManager, session_id: str, message_id: str) -> MessageOut:
    """The tenant's check and the read are one statement (one round trip on PostgreSQL)."""
    message = manager.get_message(session_id, message_id)
    if message is None:
        raise NotFoundError(f"Message {message_id!r} not found in session {session_id!r}")
    return MessageOut(message=message)


def update_message(
    manager: SessionManager, session_id: str, message_id: str, message: Message, limits: Limits
) -> MessageOut:
    """Checked first, then the tenant's session and the message are looked up by the edit itself (one round
    trip on PostgreSQL). The answer is the message as stored: it came as JSON and is stored as its compact
    JSON, which reads back as the same value, so it is not read again."""
    if message.get("id") != message_id:
        raise ValidationError(f"The message id {message.get('id')!r} does not match the path ({message_id!r})")
    limits.check_message(message)
    manager.update_message(session_id, message)
    return MessageOut(message=message)


def delete_message(manager: SessionManager, session_id: str, message_id: str) -> None:
    manager.delete_message(session_id, message_id)


def branches(
    manager: SessionManager, session_id: str, message_id: str, limits: Limits, *, limit: int | None, cursor: str | None
) -> BranchPage:
    """One page of the children, cut at ``limit`` or the response byte budget; the cursor is the last child's seq."""
    after_seq = 0
    with manager.checked_session(session_id) as session:
        if cursor:
            state = decode_cursor(cursor)
            stored_seq = state.get("s")
            if isinstance(stored_seq, bool) or not isinstance(stored_seq, int) or stored_seq < 0:
                raise ValidationError("Invalid cursor")
            if state.get("p") != message_id:
                raise ValidationError("The cursor belongs to the children of another message")
            after_seq = stored_seq
        require_message(session, session_id, message_id)
        size, budget = page_size(limit, limits), item_budget(limits)
        rows = session.get_branch_page(message_id, after_seq=after_seq, limit=size + 1, max_bytes=budget)
    loaded: list[tuple[int, Message]] = []
    for seq, message in rows[:size]:
        if message is None:  # storage stopped reading at the byte budget
            break
        loaded.append((seq, message))
    page = loaded[: count_within_bytes([message for _, message in loaded], budget)]
    next_cursor = encode_cursor({"p": message_id, "s": page[-1][0]}) if page and len(rows) > len(page) else None
    return BranchPage(messages=[message for _, message in page], next_cursor=next_cursor)


def leaf(manager: SessionManager, session_id: str) -> LeafOut:
    """The tenant's check and the read are one statement (one round trip on PostgreSQL)."""
    return LeafOut(message=manager.get_latest_leaf(session_id))


def clear(manager: SessionManager, session_id: str) -> None:
    """Delete every message, unless the session is on legal hold (a hold keeps what it holds)."""
    info = manager.get(session_id)
    if info is not None and info.legal_hold:
        raise ConflictError(f"Session {session_id!r} is on legal hold; release the hold (admin scope) to clear it")
    manager.clear_messages(session_id)
