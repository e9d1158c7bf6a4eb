"""The profile's block scopes and history bounds: valid values pass, anything else names the field."""

from __future__ import annotations

import pytest
from threadloom.api.profile import load_profile, parse_profile
from threadloom.errors import ValidationError


def _writable(**extra: object) -> dict[str, object]:
    return {"blocks": [{"label": "memory", "kind": "writable", **extra}]}


def test_a_writable_block_is_per_session_unless_the_profile_says_otherwise() -> None:
    assert parse_profile(_writable()).blocks[0].scope == "session"  # type: ignore[union-attr]
    for scope in ("subject", "tenant"):
        assert parse_profile(_writable(scope=scope)).blocks[0].scope == scope  # type: ignore[union-attr]
    assert parse_profile(_writable(scope="subject")).has_subject_blocks
    assert not parse_profile(_writable(scope="tenant")).has_subject_blocks
    assert not load_profile().has_subject_blocks  # the bundled default keeps per-session memory


def test_an_unknown_scope_names_the_field() -> None:
    with pytest.raises(ValidationError, match=r"blocks\.0\.writable\.scope: Input should be 'session', 'subject' or"):
        parse_profile(_writable(scope="user"))
    with pytest.raises(ValidationError, match=r"blocks\.0\.static\.scope: unknown key"):
        parse_profile({"blocks": [{"label": "soul", "kind": "static", "content": "x", "scope": "subject"}]})


def test_block_history_is_bounded_and_checked() -> None:
    default = parse_profile({}).block_history
    assert (default.keep_versions, default.keep_days) == (100, None)
    custom = parse_profile({"block_history": {"keep_versions": 5, "keep_days": 30}}).block_history
    assert (custom.keep_versions, custom.keep_days) == (5, 30)
    for bad in ({"keep_versions": 0}, {"keep_versions": 100001}, {"keep_days": 0}, {"forever": True}):
        with pytest.raises(ValidationError, match="block_history"):
            parse_profile({"block_history": bad})
