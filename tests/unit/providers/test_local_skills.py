"""LocalSkillProvider: one Markdown file per skill, with optional ``description`` front matter."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import pytest
from threadloom.errors import SkillStoreError, ValidationError
from threadloom.providers.local_skills import (
    FRONT_MATTER_LIMIT,
    LocalSkillProvider,
    parse_front_matter,
    render_front_matter,
    validate_skill_key,
)
from threadloom.providers.protocols import SkillProvider, is_skill_provider, is_writable_provider

if TYPE_CHECKING:
    from pathlib import Path


def write(root: Path, relative: str, text: str) -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode("utf-8"))


# --- listing -------------------------------------------------------------------------------------------------------


def test_get_lists_markdown_files_by_key_with_descriptions(tmp_path: Path) -> None:
    # Given skills at the top level and in a sub-folder, some with front matter
    write(tmp_path, "tax.md", "---\ndescription: Tax workflows\n---\nSteps...")
    write(tmp_path, "pirate.md", "Arr!")
    write(tmp_path, "guides/bank-reconciliation.md", '---\ndescription: "Bank reconciliation"\n---\n...')

    # When the collection is listed
    listing = LocalSkillProvider(tmp_path).get()

    # Then keys are relative paths without ".md", in key order, in the reference's line format
    assert listing == "- guides/bank-reconciliation: Bank reconciliation\n- pirate\n- tax: Tax workflows"


def test_get_ignores_other_files_hidden_entries_and_unusable_names(tmp_path: Path) -> None:
    # Given a skill next to a text file, a hidden file, a hidden folder, a bare ".md" and a temp file
    write(tmp_path, "real.md", "x")
    write(tmp_path, "notes.txt", "x")
    write(tmp_path, ".draft.md", "x")
    write(tmp_path, ".git/HEAD.md", "x")
    write(tmp_path, "sub/.md", "x")
    write(tmp_path, ".real.md.abc123.tmp", "x")
    write(tmp_path, "bad\\name.md", "x")

    # When the collection is listed
    listing = LocalSkillProvider(tmp_path).get()

    # Then only the skill is listed
    assert listing == "- real"


def test_get_of_a_missing_or_empty_directory_is_none(tmp_path: Path) -> None:
    # Given a directory that does not exist and one that is empty
    missing = LocalSkillProvider(tmp_path / "nope")
    empty = LocalSkillProvider(tmp_path)

    # When they are listed
    # Then neither has a listing
    assert missing.get() is None
    assert empty.get() is None


def test_allow_list_filters_listing_and_loading_but_not_writing(tmp_path: Path) -> None:
    # Given two skills, only one allowed
    write(tmp_path, "public.md", "open")
    write(tmp_path, "secret.md", "hidden")
    provider = LocalSkillProvider(tmp_path, keys=["public"])

    # When listing, loading both and writing a third
    listing = provider.get()
    loaded = (provider.load("public"), provider.load("secret"))
    provider.set("other", "written")

    # Then only the allowed skill is visible, and the write still happened
    assert listing == "- public"
    assert loaded == ("open", None)
    assert (tmp_path / "other.md").read_text() == "written"


# --- load and set ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "description",
    ["Talk like a pirate", "Café ☕ «x»", "quotes \" and ' and \\", "two\nlines", "  padded  ", "description: nested"],
)
def test_set_then_load_and_get_round_trip(tmp_path: Path, description: str) -> None:
    # Given a skill written with a description
    provider = LocalSkillProvider(tmp_path)
    provider.set("guides/pirate", "# Pirate\r\nSay arr.\n", description)

    # When it is loaded and listed
    loaded = provider.load("guides/pirate")
    listing = provider.get()

    # Then the content comes back byte for byte and the description unchanged
    assert loaded == "# Pirate\r\nSay arr.\n"
    assert listing == f"- guides/pirate: {description}"


def test_set_writes_readable_front_matter(tmp_path: Path) -> None:
    # Given a skill written with a non-ASCII description
    LocalSkillProvider(tmp_path).set("tax", "Steps", "Impôts")

    # When the file is read directly
    text = (tmp_path / "tax.md").read_text(encoding="utf-8")

    # Then it holds a double-quoted description in front matter, then the content
    assert text == '---\ndescription: "Impôts"\n---\nSteps'


def test_set_without_description_writes_the_content_alone_and_clears_the_old_one(tmp_path: Path) -> None:
    # Given a skill with a description
    provider = LocalSkillProvider(tmp_path)
    provider.set("tax", "v1", "Tax workflows")

    # When it is rewritten without one
    provider.set("tax", "v2")

    # Then the file is just the content and the listing shows the bare key
    assert (tmp_path / "tax.md").read_text() == "v2"
    assert provider.get() == "- tax"


@pytest.mark.parametrize(
    "content", ["---\ndescription: fake\n---\nbody", "---\nno closing line", "\ufeff---\nx\n---\n"]
)
def test_content_that_looks_like_front_matter_round_trips(tmp_path: Path, content: str) -> None:
    # Given content that itself opens with a front matter delimiter, stored without a description
    provider = LocalSkillProvider(tmp_path)
    provider.set("tricky", content)

    # When it is loaded and listed
    loaded = provider.load("tricky")
    listing = provider.get()

    # Then the content is returned unchanged and no description is invented
    assert loaded == content
    assert listing == "- tricky"


def test_load_of_a_missing_skill_returns_none(tmp_path: Path) -> None:
    # Given a directory with one skill and a folder
    write(tmp_path, "guides/tax.md", "x")
    provider = LocalSkillProvider(tmp_path)

    # When missing keys are loaded (including one whose parent is a file, and one in a missing directory)
    results = [provider.load("nope"), provider.load("guides/tax/deeper"), LocalSkillProvider(tmp_path / "x").load("a")]

    # Then each is None
    assert results == [None, None, None]


def test_set_creates_folders_and_leaves_no_temporary_files(tmp_path: Path) -> None:
    # Given an empty root that does not exist yet
    root = tmp_path / "skills"
    provider = LocalSkillProvider(root)

    # When nested skills are written, one of them twice
    provider.set("a/b/c", "first")
    provider.set("a/b/c", "second")
    provider.set("top", "t")

    # Then the folders exist, the last write won, and only the skill files remain
    assert provider.load("a/b/c") == "second"
    assert sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()) == ["a/b/c.md", "top.md"]


def test_set_keeps_the_existing_file_mode(tmp_path: Path) -> None:
    # Given a skill file made read-only for others
    write(tmp_path, "tax.md", "v1")
    (tmp_path / "tax.md").chmod(0o600)

    # When it is rewritten
    LocalSkillProvider(tmp_path).set("tax", "v2")

    # Then the content changed and the mode did not
    assert (tmp_path / "tax.md").read_text() == "v2"
    assert (tmp_path / "tax.md").stat().st_mode & 0o777 == 0o600


def test_set_where_a_file_blocks_the_folder_raises_skill_store_error(tmp_path: Path) -> None:
    # Given a file where the skill's folder would go
    write(tmp_path, "guides", "not a folder")

    # When a skill is written inside it
    with pytest.raises(SkillStoreError, match='Could not write skill "guides/tax"'):
        LocalSkillProvider(tmp_path).set("guides/tax", "x")

    # Then the blocking file is untouched
    assert (tmp_path / "guides").read_text() == "not a folder"


# --- keys ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "key", ["", "/etc/passwd", "..", "../escape", "a/../../b", "a/./b", "a//b", "a/", "a\\b", "nul\x00", "x" * 513]
)
def test_invalid_keys_raise_validation_error(tmp_path: Path, key: str) -> None:
    # Given a provider
    provider = LocalSkillProvider(tmp_path)

    # When an invalid key is loaded or written
    with pytest.raises(ValidationError, match="Invalid skill key"):
        provider.load(key)
    with pytest.raises(ValidationError, match="Invalid skill key"):
        provider.set(key, "x")

    # Then nothing was created
    assert list(tmp_path.iterdir()) == []


def test_symlink_escaping_the_directory_is_refused(tmp_path: Path) -> None:
    # Given a skill folder containing a symlink to a folder outside it
    outside = tmp_path / "outside"
    write(outside, "secret.md", "classified")
    root = tmp_path / "skills"
    root.mkdir()
    (root / "link").symlink_to(outside, target_is_directory=True)
    provider = LocalSkillProvider(root)

    # When the escaping path is loaded, written or listed
    with pytest.raises(ValidationError, match="outside the skill directory"):
        provider.load("link/secret")
    with pytest.raises(ValidationError, match="outside the skill directory"):
        provider.set("link/secret", "overwritten")
    listing = provider.get()

    # Then the outside file is neither read, changed nor listed
    assert (outside / "secret.md").read_text() == "classified"
    assert listing is None


def test_validate_skill_key_counts_the_prefix_in_bytes() -> None:
    # Given a key of 2-byte characters
    key = "é" * 200

    # When validated alone and with a long prefix
    alone = validate_skill_key(key)

    # Then 400 bytes pass and 400 plus a 200-byte prefix do not
    assert alone == key
    with pytest.raises(ValidationError, match="512 UTF-8 bytes"):
        validate_skill_key(key, prefix="p" * 200)


# --- front matter --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("---\ndescription: Bare value\n---\nbody", ("Bare value", "body")),
        ("---\r\ndescription: CRLF\r\n---\r\nbody\r\n", ("CRLF", "body\r\n")),
        ("\ufeff---\ndescription: After BOM\n---\nbody", ("After BOM", "body")),
        ("---\nname: skill\ndescription: 'It''s quoted'\nlicense: MIT\n---\n", ("It's quoted", "")),
        ('---\ndescription: "Line\\nbreak \\u00e9"\n---\nx', ("Line\nbreak é", "x")),
        ("---\ndescription: x\n---", ("x", "")),
        ("---\nname: no description\n---\nbody", (None, "body")),
        ("---\ndescription: never closed\nbody", (None, "---\ndescription: never closed\nbody")),
        ("no front matter\n---\n", (None, "no front matter\n---\n")),
        ("----\ndescription: x\n---\n", (None, "----\ndescription: x\n---\n")),
    ],
)
def test_parse_front_matter(text: str, expected: tuple[str | None, str]) -> None:
    # Given a skill file's text
    # When its front matter is parsed
    parsed = parse_front_matter(text)

    # Then the description and body are as documented
    assert parsed == expected


def test_front_matter_must_close_within_the_limit(tmp_path: Path) -> None:
    # Given a file whose front matter closes just past the limit
    filler = "x" * FRONT_MATTER_LIMIT
    text = f"---\ndescription: late\nfiller: {filler}\n---\nbody"
    write(tmp_path, "late.md", text)
    provider = LocalSkillProvider(tmp_path)

    # When it is listed and loaded
    listing, loaded = provider.get(), provider.load("late")

    # Then listing and loading agree that it has no front matter
    assert listing == "- late"
    assert loaded == text


def test_render_front_matter_only_when_needed() -> None:
    # Given plain content, content opening with a delimiter, and a description
    # When each is rendered
    # Then front matter is added only for a description or to protect a leading delimiter
    assert render_front_matter("plain", None) == "plain"
    assert render_front_matter("---\nx", None) == "---\n---\n---\nx"
    assert render_front_matter("plain", "Desc") == '---\ndescription: "Desc"\n---\nplain'


def test_provider_is_a_writable_skill_provider(tmp_path: Path) -> None:
    # Given a provider
    provider = LocalSkillProvider(os.fspath(tmp_path))

    # When it is classified the way ContextBlocks does
    # Then it is a skill block that accepts writes
    assert isinstance(provider, SkillProvider)
    assert is_skill_provider(provider)
    assert is_writable_provider(provider)
    assert provider.directory == tmp_path


def test_a_symlinked_file_is_listed_only_when_it_stays_inside_the_directory(tmp_path: Path) -> None:
    # Given a skill folder with a link to a skill inside it and a link to a file outside it
    root = tmp_path / "skills"
    write(root, "guides/real.md", "---\ndescription: The real one\n---\nx")
    write(tmp_path, "outside.md", "---\ndescription: Secret\n---\nclassified")
    (root / "alias.md").symlink_to(root / "guides" / "real.md")
    (root / "escape.md").symlink_to(tmp_path / "outside.md")
    (root / "dangling.md").symlink_to(root / "gone.md")

    # When the collection is listed
    entries = LocalSkillProvider(root).entries()

    # Then the inside link is a skill of its own and the outside and dangling ones are not
    assert entries == [("alias", "The real one"), ("guides/real", "The real one")]


def test_a_listing_reads_a_file_again_only_when_it_changed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Given two skills listed once
    provider = LocalSkillProvider(tmp_path)
    provider.set("pirate", "Arr.", "Talk like a pirate")
    provider.set("tax", "Sums.", "Help with taxes")
    assert provider.entries() == [("pirate", "Talk like a pirate"), ("tax", "Help with taxes")]
    reads: list[str] = []
    read = LocalSkillProvider._read

    def counted(self: LocalSkillProvider, path: Path, *, limit: int = -1) -> str:
        reads.append(path.name)
        return read(self, path, limit=limit)

    monkeypatch.setattr(LocalSkillProvider, "_read", counted)

    # When nothing changed, nothing is read again
    assert provider.entries() == [("pirate", "Talk like a pirate"), ("tax", "Help with taxes")]
    assert reads == []

    # When one file is edited in place (same size) and the other replaced through set()
    path = tmp_path / "pirate.md"
    before = path.stat().st_mtime_ns
    path.write_text(path.read_text().replace("Talk like a pirate", "Talk like a Pirate"))
    os.utime(path, ns=(before + 1_000_000, before + 1_000_000))
    provider.set("tax", "Sums.", "Help with VAT")

    # Then exactly those are read again, and the listing shows their new descriptions
    assert provider.entries() == [("pirate", "Talk like a Pirate"), ("tax", "Help with VAT")]
    assert sorted(reads) == ["pirate.md", "tax.md"]
