"""The HTTP use-cases of the data lifecycle: session export, import, subject erasure (threadloom.lifecycle underneath).

A Lambda response is capped at 6 MB, so an export larger than ``settings.export_inline_bytes``, or
than the profile's ``limits.max_response_bytes`` less ``RESPONSE_HEADROOM``, goes to the export bucket
and the caller gets a short-lived presigned URL instead. Imports
read the request body or an object of the export bucket under the tenant's own prefixes, so
one tenant can never import another's file. With ``THREADLOOM_EXPORT_SIGNING_KEY`` set, exports
are signed (HMAC-SHA256) and only files signed with that key are imported. Every key and prefix
carries the tenant percent-encoded (:func:`threadloom.lifecycle.derived.key_segment`): a claim
holding ``/`` cannot spell a folder of another tenant.
"""

from __future__ import annotations

import hashlib
import io
import uuid
from typing import TYPE_CHECKING, Any

from threadloom.api.exceptions import ForbiddenError
from threadloom.api.models import ErasureReceiptOut, ExportLink, ImportOut
from threadloom.api.observability import logger
from threadloom.api.tenancy import has_scope, require_scope
from threadloom.errors import ConflictError, NotFoundError, StorageUnavailableError, ValidationError
from threadloom.lifecycle import erase_subject as erase
from threadloom.lifecycle import export_sessions, import_sessions
from threadloom.lifecycle.derived import EXPORT_PREFIX, export_object_prefix, key_segment
from threadloom.lifecycle.export_format import signing_key_from_environment
from threadloom.lifecycle.tenant_data import SubjectNotAllowedError
from threadloom.lifecycle.transfer import LegalHoldNotAllowedError

if TYPE_CHECKING:
    from typing import IO

    from threadloom.api.runtime import Runtime

PRESIGNED_URL_SECONDS = 900
RESPONSE_HEADROOM = 8 * 1024
"""Bytes of the profile's response cap kept for what an inline export carries besides the file (its headers)."""
IMPORT_PREFIX = "imports/"


def export_session(
    runtime: Runtime,
    tenant: str,
    session_id: str,
    *,
    include_shared_blocks: bool = False,
    include_knowledge: bool = False,
) -> bytes | ExportLink:
    """The session's export file (with its subject's and the tenant's shared blocks, and the tenant's
    knowledge entries, when asked), or a link to it in S3 when it is too large for a response."""
    buffer = io.BytesIO()
    report = export_sessions(
        runtime.store.lifecycle(),
        tenant,
        [session_id],
        buffer,
        signing_key=signing_key_from_environment(),
        include_shared_blocks=include_shared_blocks,
        include_knowledge=include_knowledge,
        knowledge_labels=_search_labels(runtime),
    )
    data = buffer.getvalue()
    settings = runtime.settings
    if len(data) <= inline_export_bytes(runtime):
        return data
    if not settings.export_bucket:
        raise ValidationError(
            f"The export is {len(data)} bytes, more than a response can carry, and no export bucket is configured "
            "(THREADLOOM_EXPORT_BUCKET); use `threadloom export` against the database instead"
        )
    key = f"{export_object_prefix(tenant, session_id)}{uuid.uuid4()}.jsonl"
    s3 = _s3()
    try:
        s3.put_object(Bucket=settings.export_bucket, Key=key, Body=data, ContentType="application/x-ndjson")
        url = s3.generate_presigned_url(
            "get_object", Params={"Bucket": settings.export_bucket, "Key": key}, ExpiresIn=PRESIGNED_URL_SECONDS
        )
    except Exception as error:  # botocore raises many unrelated types
        raise StorageUnavailableError(f"Could not store the export in the export bucket: {error}") from error
    return ExportLink(url=url, expires_in=PRESIGNED_URL_SECONDS, bytes=len(data), sessions=report.sessions)


def inline_export_bytes(runtime: Runtime) -> int:
    """The largest export answered as the response itself: within ``THREADLOOM_EXPORT_INLINE_BYTES`` and, with
    room for the headers, within the profile's response cap (the handler answers 500 rather than pass it)."""
    return min(runtime.settings.export_inline_bytes, runtime.limits.max_response_bytes - RESPONSE_HEADROOM)


def import_file(
    runtime: Runtime, tenant: str, stream: IO[bytes], *, admin: bool, acting_for: tuple[str | None] | None = None
) -> ImportOut:
    """Import as ``tenant``; only an ``admin`` (the admin scope) may bring in a session on legal hold, as for PATCH.

    ``acting_for`` (the caller's subject, for a token that may not act for other users where the
    profile has subject blocks, as ``POST /sessions`` decides): other subjects' sessions and blocks are a 403.
    """
    writable = [block.label for block in runtime.profile.blocks if block.kind == "writable"]
    try:
        report = import_sessions(
            runtime.store.lifecycle(),
            tenant,
            stream,
            limits=runtime.limits,
            block_labels=writable,
            signing_key=signing_key_from_environment(),
            legal_holds=admin,
            shared_block_scopes={
                b.label: b.scope for b in runtime.profile.blocks if b.kind == "writable" and b.scope != "session"
            },
            knowledge_labels=_search_labels(runtime),
            acting_for=acting_for,
        )
    except (LegalHoldNotAllowedError, SubjectNotAllowedError) as error:
        raise ForbiddenError(str(error)) from None
    logger.info(
        "sessions imported",
        imported=len(report.imported),
        unchanged=len(report.unchanged),
        renamed=len(report.renamed),
        shared_blocks=len(report.shared_blocks_imported),
        shared_block_versions=report.shared_block_versions,
        knowledge_entries_imported=report.knowledge_entries_imported,
        knowledge_entries_unchanged=report.knowledge_entries_unchanged,
    )
    return ImportOut(
        imported=report.imported,
        unchanged=report.unchanged,
        messages=report.messages,
        renamed=report.renamed,
        shared_blocks_imported=report.shared_blocks_imported,
        shared_blocks_unchanged=report.shared_blocks_unchanged,
        shared_block_versions=report.shared_block_versions,
        knowledge_entries_imported=report.knowledge_entries_imported,
        knowledge_entries_unchanged=report.knowledge_entries_unchanged,
    )


def import_from_bucket(
    runtime: Runtime, tenant: str, key: str, *, admin: bool, acting_for: tuple[str | None] | None = None
) -> ImportOut:
    """Import an export file from the export bucket; only keys under the tenant's own prefixes are read."""
    bucket = runtime.settings.export_bucket
    if not bucket:
        raise ValidationError("Importing from S3 needs an export bucket (THREADLOOM_EXPORT_BUCKET)")
    own = key_segment(tenant)
    allowed = (f"{IMPORT_PREFIX}{own}/", f"{EXPORT_PREFIX}{own}/")
    if not key.startswith(allowed) or ".." in key.split("/"):
        raise ValidationError(f"The key must start with {allowed[0]!r} or {allowed[1]!r}")
    try:
        body = _s3().get_object(Bucket=bucket, Key=key)["Body"]
    except Exception as error:
        code = getattr(error, "response", {}).get("Error", {}).get("Code")
        if code in ("NoSuchKey", "404"):
            raise NotFoundError(f"No export file at {key!r}") from error
        if code == "AccessDenied":
            # S3 answers a missing key with AccessDenied to a role that may not list the bucket (the function's
            # listing is limited to a prefix, which GetObject does not name); the key is the tenant's own prefix
            raise NotFoundError(f"No export file at {key!r} that this deployment may read") from error
        raise StorageUnavailableError(f"Could not read {key!r} from the export bucket: {error}") from error
    with body:
        # streamed: copied to a temporary file, not read whole
        return import_file(runtime, tenant, body, admin=admin, acting_for=acting_for)


def delete_session(runtime: Runtime, tenant: str, session_id: str) -> None:
    """``DELETE /sessions/{id}``: the session's rows and what it left outside the database (prompt cache, exports…)."""
    manager = runtime.manager(tenant)
    info = manager.get(session_id)
    if info is None:
        raise NotFoundError(f"Session {session_id!r} not found")
    if info.legal_hold:  # what a hold keeps from retention, a token without the admin scope may not delete
        raise ConflictError(
            f"Session {session_id!r} is on legal hold; release the hold (admin scope) before deleting it"
        )
    for eraser in runtime.lifecycle_erasers():
        eraser.erase_session(tenant, session_id)
    if not manager.delete(session_id):
        raise NotFoundError(f"Session {session_id!r} not found")


def erase_subject(runtime: Runtime, tenant: str, subject_id: str, *, operator: str | None) -> ErasureReceiptOut:
    """Erase the subject in the tenant; the audit log line names no content (ids are digested)."""
    manager = runtime.manager(tenant)
    receipt = erase(
        runtime.store.lifecycle(),
        tenant,
        subject_id,
        erasers=runtime.lifecycle_erasers(),
        on_session=manager.forget_session,
    )
    logger.info(
        "subject erased",
        audit="subject_erasure",
        tenant=tenant,
        operator=operator,
        subject_ref="sha256:" + hashlib.sha256(f"{tenant}#{subject_id}".encode()).hexdigest()[:16],
        counts=receipt.counts,
        receipt_digest=receipt.digest,
    )
    return ErasureReceiptOut(
        namespace=receipt.namespace,
        subject_id=receipt.subject_id,
        erased_at=receipt.erased_at,
        counts=receipt.counts,
        digest=receipt.digest,
    )


def _s3() -> Any:
    from threadloom.lifecycle.derived import aws_client

    return aws_client("s3")


__all__ = [
    "delete_session",
    "erase_subject",
    "export_session",
    "has_scope",
    "import_file",
    "import_from_bucket",
    "inline_export_bytes",
    "require_scope",
]


def _search_labels(runtime: Runtime) -> list[str]:
    """The profile's ``search`` blocks: the labels whose entries the API exports, imports and shows."""
    return [block.label for block in runtime.profile.blocks if block.kind == "search"]
