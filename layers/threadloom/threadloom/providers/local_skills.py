"""Skill documents as Markdown files in a local directory: the embedded default skill store.

This is the laptop/SQLite counterpart of ``S3SkillProvider`` (the reference's R2 provider, §10), with the same
listing format and the same key rules, so a skill collection can move between a directory and a bucket unchanged.

File layout
-----------
One UTF-8 file per skill. The **key is the file's path relative to the directory, with ``/`` separators and without
the ``.md`` extension**: ``pirate.md`` is the skill ``pirate``, ``guides/tax.md`` is ``guides/tax``. Only files ending
in ``.md`` are skills; hidden files and directories (name starting with ``.``) are ignored by the listing, and so are
files whose relative path is not a valid key (see ``validate_skill_key``).

A description is optional front matter, a block opening the file::

    ---
    description: Talk like a pirate
    ---
    Arr! ...

Only the ``description`` line is read; other lines in the block (``name: ...`` of an Agent Skills ``SKILL.md``, say)
are ignored. The value may be bare, ``"double-quoted"`` (JSON/YAML escapes) or ``'single-quoted'`` (``''`` for a
quote). The block must close within the first ``FRONT_MATTER_LIMIT`` characters, otherwise the file has no front
matter. ``load`` returns the text after the block, so what ``set`` stored comes back unchanged.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from threadloom.errors import SkillStoreError, ValidationError

if TYPE_CHECKING:
    from collections.abc import Iterable

logger = logging.getLogger(__name__)

MAX_KEY_BYTES = 512
"""Longest skill key accepted, in UTF-8 bytes, counting the S3 prefix (well under S3's own 1,024)."""

FRONT_MATTER_LIMIT = 16 * 1024
"""Front matter must end (closing ``---`` line included) within this many characters of the start of the file."""

SKILL_SUFFIX = ".md"
_DELIMITER = "---"
_FILE_MODE = 0o644


def validate_skill_key(key: object, *, prefix: str = "", max_bytes: int = MAX_KEY_BYTES) -> str:
    """Return ``key`` if it is a safe skill key, else raise ``ValidationError`` saying why.

    Keys come from the model (``load_context``/``set_context`` tool calls), so they are checked before they touch a
    path or an object key: non-empty; no leading ``/``; no backslash; no control character; no empty, ``.`` or ``..``
    segment between ``/`` separators; at most ``max_bytes`` UTF-8 bytes together with ``prefix``.

    Examples
    --------
    >>> validate_skill_key("guides/tax")
    'guides/tax'
    """
    if not isinstance(key, str) or not key:
        raise ValidationError("Invalid skill key: must be a non-empty string")
    if key.startswith("/"):
        raise ValidationError(f"Invalid skill key {key!r}: must not start with '/'")
    if "\\" in key:
        raise ValidationError(f"Invalid skill key {key!r}: must not contain a backslash")
    if any(ord(char) < 0x20 or 0x7F <= ord(char) < 0xA0 for char in key):
        raise ValidationError(f"Invalid skill key {key!r}: must not contain control characters")
    if any(segment in ("", ".", "..") for segment in key.split("/")):
        raise ValidationError(f"Invalid skill key {key!r}: empty, '.' and '..' path segments are not allowed")
    if any(segment.startswith(".") for segment in key.split("/")):
        # Hidden segments hold the tenants' own namespaces (``.tenants/...``): never reachable through a key.
        raise ValidationError(f"Invalid skill key {key!r}: a path segment must not start with '.'")
    try:
        size = len((prefix + key).encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise ValidationError(f"Invalid skill key {key!r}: not valid Unicode text") from exc
    if size > max_bytes:
        raise ValidationError(f"Invalid skill key {key!r}: longer than {max_bytes} UTF-8 bytes (with the prefix)")
    return key


def parse_front_matter(text: str) -> tuple[str | None, str]:
    """Split a skill file into ``(description, body)``; ``(None, text)`` when it has no front matter."""
    position = _block_start(text)
    if position is None:
        return None, text
    description: str | None = None
    while position < len(text):
        line_end = text.find("\n", position)
        next_position = len(text) if line_end < 0 else line_end + 1
        if next_position > FRONT_MATTER_LIMIT:
            break
        line = text[position:next_position].rstrip("\r\n")
        if line == _DELIMITER:
            return description, text[next_position:]
        name, colon, value = line.partition(":")
        if colon and name.strip() == "description":
            description = _unquote(value.strip())
        position = next_position
    return None, text


def render_front_matter(content: str, description: str | None) -> str:
    """Prefix ``content`` with front matter holding ``description`` (always double-quoted, so any text survives).

    Content that itself opens with a ``---`` line gets an empty block, so ``load`` does not mistake it for one.
    """
    if description:
        return f"{_DELIMITER}\ndescription: {json.dumps(description, ensure_ascii=False)}\n{_DELIMITER}\n{content}"
    if _block_start(content) is not None:
        return f"{_DELIMITER}\n{_DELIMITER}\n{content}"
    return content


def _block_start(text: str) -> int | None:
    """Index just after an opening ``---`` line (a UTF-8 BOM may precede it), or ``None``."""
    start = 1 if text.startswith("\ufeff") else 0
    first_end = text.find("\n", start)
    if first_end < 0 or text[start:first_end].rstrip("\r") != _DELIMITER:
        return None
    return first_end + 1


def _unquote(value: str) -> str:
    """Read a bare, JSON/YAML double-quoted or YAML single-quoted scalar."""
    if len(value) >= 2 and value[0] == value[-1] == '"':
        try:
            decoded = json.loads(value)
        except ValueError:
            return value[1:-1]
        return decoded if isinstance(decoded, str) else value
    if len(value) >= 2 and value[0] == value[-1] == "'":
        return value[1:-1].replace("''", "'")
    return value


class LocalSkillProvider:
    """Keyed skill documents stored one Markdown file each under ``directory``.

    Nothing touches the file system until a method is called; a missing directory lists no skills and is created by
    the first ``set``. Writes are atomic (temporary file in the same directory, then ``os.replace``), so a concurrent
    ``load`` sees the old or the new document, never a torn one.

    Parameters
    ----------
    directory:
        Root folder of the collection.
    keys:
        Optional allow-list of keys; ``None`` or empty allows every key. As in the reference it filters ``get`` and
        ``load`` (a key outside it loads as ``None`` without reading) but not ``set``.

    Examples
    --------
    >>> skills = LocalSkillProvider("./skills")
    >>> skills.set("pirate", "Say arr.", "Talk like a pirate")  # doctest: +SKIP
    >>> skills.get()  # doctest: +SKIP
    '- pirate: Talk like a pirate'
    """

    def __init__(self, directory: str | os.PathLike[str], *, keys: Iterable[str] | None = None) -> None:
        self._directory = Path(directory)
        self._allowed: frozenset[str] | None = frozenset(keys) if keys else None
        self._descriptions: dict[Path, tuple[tuple[int, int, int], str | None]] = {}
        """Each file's description, with the (inode, size, mtime) it was read at."""

    @property
    def directory(self) -> Path:
        """The collection's root folder, as given."""
        return self._directory

    def get(self) -> str | None:
        """List the skills as ``- <key>`` / ``- <key>: <description>`` lines in key order; ``None`` when empty."""
        lines = [f"- {key}: {description}" if description else f"- {key}" for key, description in self.entries()]
        return "\n".join(lines) if lines else None

    def keys(self) -> list[str]:
        """Every listable, allowed key in key order (no file is opened)."""
        return [key for key, _ in self._scan() if self._allowed is None or key in self._allowed]

    def entries(self) -> list[tuple[str, str | None]]:
        """``(key, description)`` of every listable, allowed skill, in key order.

        A file's description is read again only when the file changed (another inode, size or
        modification time): every new session's prompt lists the skills, and a stat costs a
        tenth of opening and reading the file.
        """
        found: list[tuple[str, str | None]] = []
        known = self._descriptions
        for key, path in self._scan():
            if self._allowed is not None and key not in self._allowed:
                continue
            try:
                status = path.stat()
                version = (status.st_ino, status.st_size, status.st_mtime_ns)
                cached = known.get(path)
                if cached is not None and cached[0] == version:
                    found.append((key, cached[1]))
                    continue
                head = self._read(path, limit=FRONT_MATTER_LIMIT + 1)
            except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
                continue  # deleted since the scan
            description, _ = parse_front_matter(head)
            known[path] = (version, description)
            found.append((key, description))
        return found

    def load(self, key: str) -> str | None:
        """Return the skill's text without its front matter; ``None`` when it is missing or not allowed."""
        path = self._path_for(key)
        if self._allowed is not None and key not in self._allowed:
            return None
        try:
            text = self._read(path)
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            return None
        return parse_front_matter(text)[1]

    def set(self, key: str, content: str, description: str | None = None) -> None:
        """Create or replace a skill atomically (the allow-list does not apply to writes, as in the reference)."""
        path = self._path_for(key)
        if not isinstance(content, str):
            raise ValidationError("Skill content must be a string")
        if description is not None and not isinstance(description, str):
            raise ValidationError("Skill description must be a string")
        try:
            data = render_front_matter(content, description).encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ValidationError("Skill content and description must be valid Unicode text") from exc
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            _write_atomically(path, data)
        except OSError as exc:
            raise SkillStoreError(
                f'Could not write skill "{key}" under {self._directory}: {exc.strerror or exc}'
            ) from exc

    def _path_for(self, key: str) -> Path:
        """Map a validated key to its file, refusing any path that resolves outside the directory (symlinks too)."""
        validate_skill_key(key)
        root = self._directory.resolve()
        path = (root / (key + SKILL_SUFFIX)).resolve()
        if not path.is_relative_to(root) or path == root:
            raise ValidationError(f"Invalid skill key {key!r}: resolves outside the skill directory")
        return path

    def _scan(self) -> list[tuple[str, Path]]:
        """Every listable ``(key, path)`` under the directory, sorted by key (code point order, as S3 lists).

        Every request that renders a prompt lists the skills, so this walks with ``os.scandir`` and plain
        strings: a directory entry already says whether it is a file, a folder or a link, and only a
        link needs resolving to check that it stays inside the directory (folders that are links are
        not followed, as ``os.walk`` does not).
        """
        try:
            self._directory.stat()
        except FileNotFoundError:  # a tenant's own folder until it writes a skill: nothing to resolve
            return []
        except OSError:
            pass  # the walk below logs it
        root = os.path.realpath(self._directory)
        found: list[tuple[str, Path]] = []
        pending = [(root, "")]
        while pending:
            folder, prefix = pending.pop()
            try:
                with os.scandir(folder) as entries:
                    listed = list(entries)
            except OSError as error:
                _log_walk_error(error)
                continue
            for entry in listed:
                name = entry.name
                if name.startswith("."):
                    continue
                try:
                    if entry.is_dir(follow_symlinks=False):
                        pending.append((entry.path, f"{prefix}{name}/"))
                        continue
                except OSError:
                    continue
                if not name.endswith(SKILL_SUFFIX) or len(name) == len(SKILL_SUFFIX):
                    continue
                key = prefix + name[: -len(SKILL_SUFFIX)]
                try:
                    validate_skill_key(key)
                    if entry.is_symlink():
                        resolved = os.path.realpath(entry.path)
                        listable = os.path.commonpath((root, resolved)) == root and Path(resolved).is_file()
                    else:
                        resolved, listable = entry.path, entry.is_file(follow_symlinks=False)
                except (ValidationError, OSError, ValueError):
                    logger.debug("Skipping skill file with an unusable name: %r", entry.path)
                    continue
                if listable:
                    found.append((key, Path(resolved)))
        found.sort(key=lambda item: item[0])
        return found

    def _read(self, path: Path, *, limit: int = -1) -> str:
        """Read UTF-8 text verbatim (no newline translation; invalid bytes become U+FFFD, like ``TextDecoder``)."""
        try:
            with path.open(encoding="utf-8", errors="replace", newline="") as handle:
                text = handle.read(limit)
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            raise
        except OSError as exc:
            raise SkillStoreError(f"Could not read skill file {path}: {exc.strerror or exc}") from exc
        return text


def _write_atomically(path: Path, data: bytes) -> None:
    """Write ``data`` to a temporary sibling, flush it to disk, then rename it over ``path``."""
    try:
        mode = path.stat().st_mode & 0o777
    except FileNotFoundError:
        mode = _FILE_MODE
    fd, temp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    temp_path = Path(temp_name)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        temp_path.chmod(mode)
        temp_path.replace(path)
    except BaseException:
        temp_path.unlink(missing_ok=True)
        raise


def _log_walk_error(error: OSError) -> None:
    """A missing directory is an empty collection; anything else is logged and skipped."""
    if not isinstance(error, FileNotFoundError):
        logger.warning("Could not list part of the skill directory: %s", error)


__all__ = [
    "FRONT_MATTER_LIMIT",
    "MAX_KEY_BYTES",
    "LocalSkillProvider",
    "parse_front_matter",
    "render_front_matter",
    "validate_skill_key",
]
