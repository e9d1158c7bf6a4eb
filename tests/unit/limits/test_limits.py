"""The limits table and its text rules, through the library's write paths (sessions, managers, model tools)."""

from __future__ import annotations

from typing import Any

import pytest
from threadloom import Session, SessionManager, SqliteStore
from threadloom.errors import PayloadTooLargeError, ValidationError
from threadloom.limits import DEFAULT_LIMITS, HARD_LIMITS, ROLES, Limits, check_text


def message(message_id: str = "m1", text: str = "hello", role: str = "user", **extra: Any) -> dict[str, Any]:
    return {"id": message_id, "role": role, "parts": [{"type": "text", "text": text}], **extra}


def nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = {"x": value}
    return value


@pytest.mark.parametrize(
    ("text", "reason"),
    [("a\x00b", "NUL"), ("a\ud800b", "surrogate"), ("\udfff", "surrogate")],
)
def test_text_rules_refuse_nul_and_lone_surrogates(text: str, reason: str) -> None:
    with pytest.raises(ValidationError, match=reason):
        check_text(text, "name")
    assert check_text("naïve 🙂", "name") == "naïve 🙂"  # a real pair is fine


@pytest.mark.parametrize(
    "bad",
    ["my id", "a/b", "what?", "emoji🙂", "50%", "a#b", ".", "..", "x" * 257, "", "tab\t"],
)
def test_ids_use_only_what_a_path_carries(bad: str) -> None:
    with pytest.raises(ValidationError):
        DEFAULT_LIMITS.check_id(bad, "message id")


@pytest.mark.parametrize("good", ["m1", "msg-AbC_12", "2f1c0e3a-9d1e-4b8a-8b51-6b0f0c3f8d10", "a.b~c:d@e", "..x"])
def test_ids_accept_the_alphabet(good: str) -> None:
    assert DEFAULT_LIMITS.check_id(good) == good


def test_message_rule_names_the_allowed_roles() -> None:
    with pytest.raises(ValidationError, match="role 'wizard'"):
        DEFAULT_LIMITS.check_message(message(role="wizard"))
    for role in ROLES:
        DEFAULT_LIMITS.check_message(message(role=role))


def test_nesting_is_bounded_without_recursion() -> None:
    DEFAULT_LIMITS.check_message(message(metadata=nested(DEFAULT_LIMITS.max_nesting_depth - 3)))
    with pytest.raises(ValidationError, match="nests deeper"):
        DEFAULT_LIMITS.check_message(message(metadata=nested(DEFAULT_LIMITS.max_nesting_depth)))
    with pytest.raises(ValidationError, match="nests deeper"):
        DEFAULT_LIMITS.check_message(message(metadata=nested(100_000)))  # no RecursionError


def test_non_finite_numbers_and_huge_integers_are_refused() -> None:
    with pytest.raises(ValidationError, match="not finite"):
        DEFAULT_LIMITS.check_message(message(metadata={"score": float("inf")}))
    with pytest.raises(ValidationError, match="64-bit"):
        DEFAULT_LIMITS.check_message(message(metadata={"n": 10**30}))


def test_message_size_is_a_413_kind_of_error() -> None:
    small = Limits(max_message_bytes=100)
    with pytest.raises(PayloadTooLargeError, match="limit is 100 bytes"):
        small.check_message(message(text="x" * 200))


def test_usage_increments_and_totals_stay_finite_and_bounded() -> None:
    with pytest.raises(ValidationError, match="cost"):
        DEFAULT_LIMITS.check_usage(0, 0, float("inf"))
    with pytest.raises(ValidationError, match="cost"):
        DEFAULT_LIMITS.check_usage(0, 0, float("nan"))
    with pytest.raises(ValidationError, match="inputTokens"):
        DEFAULT_LIMITS.check_usage(2**64, 0, 0.0)
    with pytest.raises(ValidationError, match="totals"):
        DEFAULT_LIMITS.check_usage_totals(DEFAULT_LIMITS.max_usage_tokens + 1, 0, 0.0)


def test_table_refuses_values_over_the_hard_ceilings_and_inconsistent_pages() -> None:
    with pytest.raises(ValidationError, match="cannot exceed"):
        Limits(max_message_bytes=HARD_LIMITS.max_message_bytes + 1)
    with pytest.raises(ValidationError, match="default_page_size"):
        Limits(default_page_size=10, max_page_size=5)
    with pytest.raises(ValidationError, match="Unknown limits"):
        DEFAULT_LIMITS.with_overrides({"max_bananas": 3})


# ------------------------------------------------------------ library write paths


@pytest.fixture
def manager(tmp_path: Any) -> SessionManager:
    return SessionManager.create(SqliteStore(str(tmp_path / "t.db")), namespace="t").with_limits(
        Limits(max_message_bytes=2048, max_block_bytes=100, max_entry_bytes=50, max_skill_bytes=50)
    )


def test_session_writes_apply_the_configured_table(tmp_path: Any) -> None:
    session = Session.create(SqliteStore(str(tmp_path / "s.db"))).for_session("s").with_limits(Limits(max_id_chars=8))
    with pytest.raises(ValidationError, match="longer than 8"):
        session.append_message(message("m" * 9))
    with pytest.raises(ValidationError, match="NUL"):
        session.append_message(message(text="nul\x00"))
    with pytest.raises(ValidationError, match="surrogate"):
        session.append_message(message(), "p\ud800")
    with pytest.raises(ValidationError, match="surrogate"):
        session.append_message(message(), expected_leaf_id="\udc00")
    with pytest.raises(ValidationError, match="role"):
        session.append_messages([message("a"), message("b", role="tool")])
    assert session.get_history() == []  # nothing half-written
    session.append_message(message("ok"))
    with pytest.raises(ValidationError, match="NUL"):
        session.update_message(message("ok", text="\x00"))


def test_manager_checks_names_summaries_and_usage(manager: SessionManager) -> None:
    with pytest.raises(ValidationError, match="NUL"):
        manager.create("bad\x00name")
    with pytest.raises(ValidationError, match="surrogate"):
        manager.create("ok", model="\ud800")
    info = manager.create("chat")
    with pytest.raises(ValidationError, match="longer than"):
        manager.rename(info.id, "x" * (manager.limits.max_name_chars + 1))
    with pytest.raises(ValidationError, match="cost"):
        manager.add_usage(info.id, 0, 0, 1e400)
    manager.add_usage(info.id, 1, 2, 0.5)
    with pytest.raises(ValidationError, match="token totals"):
        manager.add_usage(info.id, manager.limits.max_usage_tokens, 0, 0.0)
    assert manager.get(info.id) is not None
    assert manager.get(info.id).input_tokens == 1  # type: ignore[union-attr]
    with pytest.raises(ValidationError, match="NUL"):
        manager.compact_and_split(info.id, "summary\x00")


def test_model_tools_obey_the_same_table_as_the_http_api(tmp_path: Any) -> None:
    """The issue's 4 MB knowledge entry and 3 MB skill through ``set_context``: refused, as PUT refuses them."""

    class Skills:
        def __init__(self) -> None:
            self.docs: dict[str, str] = {}

        def get(self) -> str | None:
            return "\n".join(f"- {key}" for key in self.docs) or None

        def load(self, key: str) -> str | None:
            return self.docs.get(key)

        def set(self, key: str, content: str, description: str | None = None) -> None:
            self.docs[key] = content

    class Knowledge:
        def __init__(self) -> None:
            self.entries: dict[str, str] = {}

        def get(self) -> str | None:
            return f"{len(self.entries)} entries" if self.entries else None

        def search(self, query: str) -> str | None:
            return None

        def set(self, key: str, content: str) -> None:
            self.entries[key] = content

    skills, knowledge = Skills(), Knowledge()
    limits = Limits(max_block_bytes=100, max_entry_bytes=50, max_skill_bytes=50, max_skill_description_chars=10)
    session = (
        Session.create(SqliteStore(str(tmp_path / "tools.db")))
        .for_session("s")
        .with_limits(limits)
        .with_context("memory")
        .with_context("skills", provider=skills)
        .with_context("knowledge", provider=knowledge)
    )
    set_context = session.tools()["set_context"]
    assert "limit is 100 bytes" in set_context.execute({"label": "memory", "content": "x" * 101})
    assert "limit is 50 bytes" in set_context.execute({"label": "knowledge", "content": "x" * 51})
    big_skill = {"label": "skills", "content": "x" * 51, "metadata": {"title": "big"}}
    assert "limit is 50 bytes" in set_context.execute(big_skill)
    long_description = {"label": "skills", "content": "ok", "metadata": {"title": "t", "description": "d" * 11}}
    assert "longer than 10" in set_context.execute(long_description)
    assert "NUL" in set_context.execute({"label": "memory", "content": "\x00"})
    assert skills.docs == {} and knowledge.entries == {}
    assert set_context.execute({"label": "memory", "content": "fits"}).startswith("Written to memory")


def test_a_message_the_session_checked_is_not_walked_again_by_the_storage_under_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from threadloom.core.messages import validate_message

    walks: list[str] = []
    check_json = Limits.check_json

    def counted(self: Limits, value: Any, what: str, **options: Any) -> int:
        walks.append(what)
        return int(check_json(self, value, what, **options))

    monkeypatch.setattr(Limits, "check_json", counted)
    store = SqliteStore(":memory:")
    session = Session.create(store).for_session("s")
    message = {"id": "m1", "role": "user", "parts": [{"type": "text", "text": "hello"}]}
    session.append_message(message)
    assert walks == ["message 'm1'"]
    # The storage used on its own still checks everything, with the hard limits
    walks.clear()
    store.session_provider("s").append_message({"id": "m2", "role": "user", "parts": []})
    assert walks == ["message 'm2'"]
    with pytest.raises(ValidationError, match="NUL"):
        store.session_provider("s").append_message({"id": "m3", "role": "user", "parts": [{"type": "x\x00"}]})
    # And only the very object just checked is trusted, once
    checked = {"id": "m4", "role": "user", "parts": []}
    Limits().check_message(checked)
    walks.clear()
    validate_message(dict(checked))
    validate_message(checked)
    validate_message(checked)
    assert len(walks) == 2


def test_a_message_is_stored_as_its_compact_json() -> None:
    from threadloom.core.messages import serialize_message
    from threadloom.jscompat import compact_json

    # The stored text skips the encoder's cycle check (messages are validated first) and is the same
    message: dict[str, Any] = {
        "role": "assistant",
        "id": "m1",
        "parts": [
            {"type": "text", "text": 'héllo «q» "x" \\ \u2028 😀'},
            {"type": "tool-x", "input": [1.5, None, True]},
        ],
        "metadata": {"big": 2**62, "neg": -1e-7, "nested": {"deep": [[{}]]}},
    }
    assert serialize_message(message) == compact_json(message)
    # A message that contains itself (never validated) is refused, not a crash
    looped: dict[str, Any] = {"id": "loop", "role": "user", "parts": []}
    looped["parts"].append(looped)
    with pytest.raises(ValidationError, match="contains itself"):
        serialize_message(looped)
    with pytest.raises(ValidationError, match="not JSON-serializable"):
        serialize_message({"id": "set", "role": "user", "parts": [{"type": "x", "value": {1}}]})
