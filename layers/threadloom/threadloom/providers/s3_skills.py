"""Skill documents in an Amazon S3 bucket: the reference's ``R2SkillProvider`` (§10) ported to S3.

Differences forced by S3, and what they cost
--------------------------------------------
* **Descriptions need one HEAD per object.** R2 can list custom metadata; ``ListObjectsV2`` cannot. ``get`` therefore
  costs one LIST request per 1,000 keys plus one ``HeadObject`` per listed, allowed key. The HEADs run on a small thread
  pool (``max_workers``, default 8) and their results are cached on the provider per key, keyed by the object's
  ``ETag`` *and* ``LastModified`` (a metadata-only change through ``CopyObject`` keeps the ETag but not the date).
  A provider kept for the life of a Lambda environment thus pays the HEADs once per changed object; a fresh provider
  pays them all. ``LastModified`` has one-second resolution, so a metadata-only copy made within the same second as
  the previous write goes unnoticed until the object changes again or a new provider lists it. Writes through
  ``set`` always invalidate. Keys listed but gone by the time of the HEAD are left out.
* **User metadata must be ASCII.** ``set`` stores a description verbatim when it is printable ASCII without leading or
  trailing blanks and without ``=?``; anything else is stored as one RFC 2047 encoded word,
  ``=?UTF-8?B?<base64>?=``. That is the encoding S3 itself documents for non-ASCII metadata, so descriptions written by
  other tools that follow it decode too. On read, a value containing ``=?`` is RFC 2047-decoded (B or Q, any charset
  Python knows); one that fails to decode is shown as stored.
* **Keys are validated** with ``validate_skill_key`` (shared with ``LocalSkillProvider``) on ``load`` and ``set``;
  listed objects whose relative key is not valid (``a//b``, ``../x``, folder placeholders ending in ``/``, keys over
  ``MAX_KEY_BYTES``) are left out of the listing, since they could never be loaded.
* **Errors are translated**: a missing bucket or denied access raises ``SkillStoreError``; throttling, 5xx and network
  failures (after botocore's standard-mode retries) raise ``StorageUnavailableError``. No botocore exception escapes.
"""

from __future__ import annotations

import base64
import functools
import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from email.errors import HeaderParseError
from email.header import decode_header, make_header
from typing import TYPE_CHECKING

from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    NoCredentialsError,
    ParamValidationError,
    PartialCredentialsError,
)

from threadloom.aws_clients import client_config
from threadloom.errors import SkillStoreError, StorageUnavailableError, ThreadloomError, ValidationError
from threadloom.providers.local_skills import MAX_KEY_BYTES, validate_skill_key

if TYPE_CHECKING:
    from collections.abc import Iterable

    from mypy_boto3_s3.client import S3Client
    from mypy_boto3_s3.type_defs import PaginatorConfigTypeDef

logger = logging.getLogger(__name__)

DESCRIPTION_METADATA_KEY = "description"
MAX_METADATA_BYTES = 2048
"""S3's limit on user metadata: the UTF-8 bytes of every key plus every value."""

_MISSING_OBJECT_CODES = frozenset({"NoSuchKey", "404", "NotFound"})
_DENIED_CODES = frozenset(
    {"AccessDenied", "AllAccessDisabled", "InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken", "InvalidToken"}
)
_TRANSIENT_CODES = frozenset(
    {"SlowDown", "Throttling", "ThrottlingException", "RequestTimeout", "ServiceUnavailable", "InternalError"}
)


@functools.cache
def default_s3_client() -> S3Client:
    """The process-wide S3 client used when none is injected, built on first use (never at import).

    The client comes from a fresh ``boto3.session.Session`` because creating clients from boto3's shared default
    session is not thread-safe; if two threads race here, one client is cached and the other discarded.
    """
    import boto3

    return boto3.session.Session().client("s3", config=client_config())


def encode_description(description: str) -> str:
    """Make ``description`` safe for an S3 metadata header: verbatim when it can be, else one RFC 2047 encoded word."""
    if (
        description.isascii()
        and description.isprintable()
        and description == description.strip()
        and "=?" not in description
    ):
        return description
    try:
        payload = base64.b64encode(description.encode("utf-8")).decode("ascii")
    except UnicodeEncodeError as exc:
        raise ValidationError("Skill description must be valid Unicode text") from exc
    return f"=?UTF-8?B?{payload}?="


def decode_description(value: str) -> str:
    """Undo ``encode_description`` (and any RFC 2047 encoding S3 or another tool applied); bad values pass as is."""
    if "=?" not in value:
        return value
    try:
        return str(make_header(decode_header(value)))
    except (HeaderParseError, LookupError, ValueError):
        return value


class S3SkillProvider:
    """Keyed skill documents stored as objects under ``prefix`` in an S3 bucket.

    Parameters
    ----------
    bucket:
        Bucket name.
    prefix:
        Prepended to every key exactly as given (no ``/`` is added) and stripped from listed keys.
    keys:
        Optional allow-list of keys relative to ``prefix``; ``None`` or empty allows all. It filters ``get`` and makes
        ``load`` return ``None`` without a request, but does not restrict ``set`` (as in the reference).
    client:
        An S3 client to use; by default ``default_s3_client()`` is built on first use.
    max_workers:
        Most ``HeadObject`` calls in flight while listing descriptions.
    page_size:
        ``ListObjectsV2`` page size (S3's default and maximum is 1,000); mostly for tests.

    Examples
    --------
    >>> skills = S3SkillProvider("my-skills", prefix="agents/support/")
    >>> skills.set("tax", "# Tax workflows...", "Tax workflows")  # doctest: +SKIP
    >>> skills.get()  # doctest: +SKIP
    '- tax: Tax workflows'
    """

    def __init__(
        self,
        bucket: str,
        *,
        prefix: str = "",
        keys: Iterable[str] | None = None,
        client: S3Client | None = None,
        max_workers: int = 8,
        page_size: int | None = None,
    ) -> None:
        if not bucket:
            raise ValidationError("S3SkillProvider needs a bucket name")
        if max_workers < 1:
            raise ValidationError("max_workers must be at least 1")
        if page_size is not None and not 1 <= page_size <= 1000:
            raise ValidationError("page_size must be between 1 and 1000")
        self._bucket = bucket
        self._prefix = prefix
        self._allowed: frozenset[str] | None = frozenset(keys) if keys else None
        self._client = client
        self._max_workers = max_workers
        self._page_size = page_size
        self._cache_lock = threading.Lock()
        self._descriptions: dict[str, tuple[str, str | None]] = {}

    @property
    def bucket(self) -> str:
        """The bucket name."""
        return self._bucket

    @property
    def prefix(self) -> str:
        """The key prefix, exactly as given."""
        return self._prefix

    @property
    def _s3(self) -> S3Client:
        if self._client is None:
            self._client = default_s3_client()
        return self._client

    def get(self) -> str | None:
        """List the skills as ``- <key>`` / ``- <key>: <description>`` lines in listing order; ``None`` when empty."""
        lines = [f"- {key}: {description}" if description else f"- {key}" for key, description in self.entries()]
        return "\n".join(lines) if lines else None

    def keys(self) -> list[str]:
        """Every listable, allowed key in listing order (LIST requests only, no HEAD)."""
        return [key for key, _, _ in self._list()]

    def entries(self) -> list[tuple[str, str | None]]:
        """``(key, description)`` of every listable, allowed skill, in listing order."""
        listed = self._list()
        descriptions = self._describe(listed)
        # An object deleted between the LIST and the HEAD has no description entry: left out.
        return [(key, descriptions[full_key]) for key, full_key, _ in listed if full_key in descriptions]

    def load(self, key: str) -> str | None:
        """Return the skill's UTF-8 text (invalid bytes become U+FFFD); ``None`` when missing or not allowed."""
        validate_skill_key(key, prefix=self._prefix)
        if self._allowed is not None and key not in self._allowed:
            return None
        try:
            response = self._s3.get_object(Bucket=self._bucket, Key=self._prefix + key)
            body = response["Body"]
            try:
                data = body.read()
            finally:
                body.close()
        except ClientError as exc:
            if _error_code(exc) in _MISSING_OBJECT_CODES:
                return None
            raise self._translate(exc, f'load skill "{key}"') from exc
        except BotoCoreError as exc:
            raise self._translate(exc, f'load skill "{key}"') from exc
        return data.decode("utf-8", errors="replace")

    def set(self, key: str, content: str, description: str | None = None) -> None:
        """Create or replace a skill; a truthy ``description`` goes to the object's ``description`` metadata."""
        validate_skill_key(key, prefix=self._prefix)
        if not isinstance(content, str):
            raise ValidationError("Skill content must be a string")
        if description is not None and not isinstance(description, str):
            raise ValidationError("Skill description must be a string")
        metadata: dict[str, str] = {}
        if description:
            encoded = encode_description(description)
            if len(DESCRIPTION_METADATA_KEY) + len(encoded) > MAX_METADATA_BYTES:
                raise ValidationError(
                    f"Skill description is too long for S3 object metadata (at most {MAX_METADATA_BYTES} bytes encoded)"
                )
            metadata[DESCRIPTION_METADATA_KEY] = encoded
        try:
            body = content.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ValidationError("Skill content must be valid Unicode text") from exc
        full_key = self._prefix + key
        try:
            self._s3.put_object(
                Bucket=self._bucket,
                Key=full_key,
                Body=body,
                ContentType="text/plain; charset=utf-8",
                Metadata=metadata,
            )
        except (ClientError, BotoCoreError) as exc:
            raise self._translate(exc, f'store skill "{key}"') from exc
        finally:
            with self._cache_lock:
                self._descriptions.pop(full_key, None)

    def _list(self) -> list[tuple[str, str, str]]:
        """Page through the prefix; return ``(key, full_key, fingerprint)`` for each listable, allowed object."""
        pagination: PaginatorConfigTypeDef = {"PageSize": self._page_size} if self._page_size else {}
        listed: list[tuple[str, str, str]] = []
        paginator = self._s3.get_paginator("list_objects_v2")
        try:
            for page in paginator.paginate(Bucket=self._bucket, Prefix=self._prefix, PaginationConfig=pagination):
                for entry in page.get("Contents", []):
                    full_key = entry.get("Key", "")
                    key = full_key[len(self._prefix) :]
                    if self._allowed is not None and key not in self._allowed:
                        continue
                    if not _is_valid_key(key, self._prefix):
                        logger.debug("Skipping S3 object whose key is not a valid skill key: %r", full_key)
                        continue
                    modified = entry.get("LastModified")
                    fingerprint = f"{entry.get('ETag', '')}|{modified.isoformat() if modified else ''}"
                    listed.append((key, full_key, fingerprint))
        except (ClientError, BotoCoreError) as exc:
            raise self._translate(exc, "list skills") from exc
        return listed

    def _describe(self, listed: list[tuple[str, str, str]]) -> dict[str, str | None]:
        """Descriptions by full key, from the cache when the fingerprint matches, else from concurrent HEADs."""
        with self._cache_lock:
            cached = dict(self._descriptions)
        fresh: dict[str, tuple[str, str | None]] = {}
        stale: list[tuple[str, str]] = []
        for _, full_key, fingerprint in listed:
            hit = cached.get(full_key)
            if hit is not None and hit[0] == fingerprint:
                fresh[full_key] = hit
            else:
                stale.append((full_key, fingerprint))
        if len(stale) == 1 or self._max_workers == 1:
            fetched = [self._head_description(full_key) for full_key, _ in stale]
        elif stale:
            with ThreadPoolExecutor(max_workers=min(self._max_workers, len(stale))) as pool:
                fetched = list(pool.map(self._head_description, [full_key for full_key, _ in stale]))
        else:
            fetched = []
        found: dict[str, str | None] = {}
        for (full_key, fingerprint), (exists, description) in zip(stale, fetched, strict=True):
            if exists:
                fresh[full_key] = (fingerprint, description)
        for full_key, (_, description) in fresh.items():
            found[full_key] = description
        with self._cache_lock:
            self._descriptions = fresh
        return found

    def _head_description(self, full_key: str) -> tuple[bool, str | None]:
        """``(exists, description)`` of one object, from its user metadata."""
        try:
            response = self._s3.head_object(Bucket=self._bucket, Key=full_key)
        except ClientError as exc:
            if _error_code(exc) in _MISSING_OBJECT_CODES:
                return False, None
            raise self._translate(exc, "read skill descriptions") from exc
        except BotoCoreError as exc:
            raise self._translate(exc, "read skill descriptions") from exc
        value = response.get("Metadata", {}).get(DESCRIPTION_METADATA_KEY)
        return True, decode_description(value) if value else None

    def _translate(self, exc: ClientError | BotoCoreError, action: str) -> ThreadloomError:
        """Map a botocore failure to ``SkillStoreError`` (will not succeed on retry) or ``StorageUnavailableError``."""
        where = f'S3 bucket "{self._bucket}"'
        if isinstance(exc, ClientError):
            code = _error_code(exc)
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
            if code == "NoSuchBucket":
                return SkillStoreError(f"Skill store {where} does not exist (could not {action})")
            if code in _DENIED_CODES or status == 403:
                return SkillStoreError(f"Access to skill store {where} was denied (could not {action}: {code})")
            if code in _TRANSIENT_CODES or status >= 500 or status == 429:
                return StorageUnavailableError(f"Skill store {where} is unavailable (could not {action}: {code})")
            return SkillStoreError(f"Skill store {where} refused the request (could not {action}: {code})")
        if isinstance(exc, NoCredentialsError | PartialCredentialsError | ParamValidationError):
            return SkillStoreError(f"Skill store {where} could not be called (could not {action}: {exc})")
        return StorageUnavailableError(f"Skill store {where} could not be reached (could not {action}: {exc})")


def _error_code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def _is_valid_key(key: str, prefix: str) -> bool:
    try:
        validate_skill_key(key, prefix=prefix)
    except ValidationError:
        return False
    return True


__all__ = [
    "DESCRIPTION_METADATA_KEY",
    "MAX_KEY_BYTES",
    "S3SkillProvider",
    "decode_description",
    "default_s3_client",
    "encode_description",
]
