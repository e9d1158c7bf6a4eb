"""What the HTTP edge refuses before routing, so that no input a client can send becomes a 5xx.

The resolver parses bodies lazily inside its validation step, where a body that is not
UTF-8 raised ``UnicodeDecodeError`` (a 500), a non-JSON media type became a 500, a
deep nesting a ``RecursionError`` and invalid JSON "body.13: JSON decode error". Here
each of those is a typed error with a sentence a person understands: 415 for a body
that is not JSON, 400 for bytes that are not UTF-8, text that is not JSON, text rules
broken anywhere in the request (path, query, body) or a nesting deeper than the limits.

CORS is configured here as well, from one setting (``THREADLOOM_CORS_ORIGINS``, comma
separated, ``*`` for any origin) that the deployed function and ``make serve`` read the
same way; the SAM template's ``CorsConfiguration`` mirrors it.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import re
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.event_handler import CORSConfig

from threadloom.api.exceptions import UnsupportedMediaTypeError
from threadloom.errors import PayloadTooLargeError, ValidationError
from threadloom.limits import check_text

if TYPE_CHECKING:
    from collections.abc import Mapping

    from threadloom.limits import Limits

BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
MAX_BODY_BYTES = 6 * 1024 * 1024
"""API Gateway's own payload limit; a body over it never reaches a real deployment."""
CORS_ORIGINS_VARIABLE = "THREADLOOM_CORS_ORIGINS"
CORS_HEADERS = ["Authorization", "Content-Type", "Idempotency-Key", "If-Match"]
CORS_MAX_AGE_SECONDS = 600
JSON_LINES = "application/x-ndjson"
JSON_LINES_PATHS = frozenset({"/sessions/import"})
"""Routes whose body is an export file (JSON Lines), validated line by line by the import itself."""
STRICT_TRANSPORT_SECURITY = "max-age=31536000; includeSubDomains"
"""HSTS for a year: API Gateway answers HTTPS only, so a browser should never try plain HTTP on the API's name."""
SECURITY_HEADERS = {"Strict-Transport-Security": STRICT_TRANSPORT_SECURITY}


def with_security_headers(response: dict[str, Any]) -> dict[str, Any]:
    """The Lambda response with the headers every deployed answer carries (errors and refusals included)."""
    headers = {**(response.get("headers") or {})}
    present = {str(key).lower() for key in headers}
    headers.update({key: value for key, value in SECURITY_HEADERS.items() if key.lower() not in present})
    return {**response, "headers": headers}


def cors_config(environ: Mapping[str, str] | None = None) -> CORSConfig | None:
    """Powertools CORS from ``THREADLOOM_CORS_ORIGINS``; None (no CORS headers, no preflight) when unset."""
    env = os.environ if environ is None else environ
    origins = [origin.strip() for origin in env.get(CORS_ORIGINS_VARIABLE, "").split(",") if origin.strip()]
    if not origins:
        return None
    return CORSConfig(
        allow_origin=origins[0],
        extra_origins=origins[1:],
        allow_headers=CORS_HEADERS,
        expose_headers=["Content-Type"],
        max_age=CORS_MAX_AGE_SECONDS,
    )


# API Gateway decodes the path; a route parameter matches only these characters (the event
# handler's own set), so anything else would be a misleading "No such route".
_PATH_CHARACTER_OUTSIDE_ROUTES = re.compile(r"[^-._~()'!*:@,;=+&$%<> \[\]{}|^\w/]")


def check_event(event: Mapping[str, Any], limits: Limits, *, extra_depth: int = 2) -> None:
    """Raise the typed error for anything in an API Gateway v2 event the resolver cannot safely parse.

    ``extra_depth``: the levels a body wraps a message in beyond the limit (``/mcp`` wraps it deeper).
    """
    path = check_text(event.get("rawPath") or "", "request path")
    odd = _PATH_CHARACTER_OUTSIDE_ROUTES.search(path)
    if odd is not None:
        character = odd.group()
        raise ValidationError(
            f"The request path contains {character!r} (U+{ord(character):04X}), which no id or name in a path may hold"
        )
    for name, value in (event.get("queryStringParameters") or {}).items():
        check_text(name, "query parameter name")
        check_text(value, f"query parameter {name!r}")
    method = str(event.get("requestContext", {}).get("http", {}).get("method", "")).upper()
    body = event.get("body")
    if method not in BODY_METHODS or not body:
        return
    headers = {str(key).lower(): value for key, value in (event.get("headers") or {}).items()}
    media_type = str(headers.get("content-type") or "application/json").split(";", 1)[0].strip().lower()
    if media_type == JSON_LINES and event.get("rawPath") in JSON_LINES_PATHS:
        _check_utf8(_sized(_body_bytes(body, encoded=bool(event.get("isBase64Encoded")))))
        return
    if media_type != "application/json":
        raise UnsupportedMediaTypeError(
            f"The request body must be JSON (Content-Type: application/json), not {media_type!r}"
        )
    text = _check_utf8(_sized(_body_bytes(body, encoded=bool(event.get("isBase64Encoded")))))
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValidationError(
            f"The request body is not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}"
        ) from None
    except RecursionError:
        raise ValidationError(
            f"The request body nests deeper than {limits.max_nesting_depth} levels of objects and arrays"
        ) from None
    except ValueError as exc:  # e.g. an integer literal with more digits than Python converts
        raise ValidationError(f"The request body is not usable JSON: {exc}") from None
    # Two more levels than a message may use by default: a body wraps messages ({"messages": [{...}]}).
    limits.check_json(parsed, "request body", extra_depth=extra_depth)


def _sized(raw: bytes) -> bytes:
    if len(raw) > MAX_BODY_BYTES:
        raise PayloadTooLargeError(f"The request body is {len(raw)} bytes; the limit is {MAX_BODY_BYTES} bytes")
    return raw


def _check_utf8(raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValidationError(
            f"The request body is not valid UTF-8 text (byte 0x{raw[exc.start]:02x} at position {exc.start})"
        ) from None


def _body_bytes(body: str, *, encoded: bool) -> bytes:
    if encoded:
        try:
            return base64.b64decode(body, validate=True)
        except (binascii.Error, ValueError):
            raise ValidationError("The request body is marked base64 but is not valid base64") from None
    try:
        return body.encode("utf-8")
    except UnicodeEncodeError:
        raise ValidationError("The request body is not valid UTF-8 text") from None


__all__ = [
    "BODY_METHODS",
    "CORS_ORIGINS_VARIABLE",
    "MAX_BODY_BYTES",
    "SECURITY_HEADERS",
    "check_event",
    "cors_config",
    "with_security_headers",
]
