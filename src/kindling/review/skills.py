"""Skills as Hermes Agent keeps them: ``$HERMES_HOME/skills/[<category>/]<name>/SKILL.md``.

A SKILL.md starts with YAML front matter between ``---`` lines (``name`` and ``description``
required; ``version`` and ``tags`` optional) followed by the instructions. Names and categories
match ``^[a-z0-9][a-z0-9._-]*$`` and are at most 64 characters, so they are always safe path
segments. Writes are atomic and serialised by one lock on the skills directory.

Mutations (create, edit, patch, delete) return Hermes-shaped result dicts for the model
(``{"success": true, "message": "Skill 'x' created.", ...}`` or ``{"success": false, "error"}``);
reads (:meth:`SkillStore.list`, :meth:`SkillStore.read`) return :class:`Skill` objects and raise.

Kept exactly as Hermes Agent reads them:

- tags live under ``metadata.hermes.tags`` (the agentskills.io convention Hermes reads first);
  a top-level ``tags`` in written content is moved there, and both places are read;
- the front matter ``name`` must equal the skill's folder name (Hermes lists a skill under its
  front matter name, so a mismatch would be a second name for the same folder);
- a skill created by a review is marked in ``skills/.usage.json`` the way Hermes marks the skills
  its own background review creates (``created_by: agent``), so Hermes's curator manages it; an
  edit or patch counts as a patch there, a delete forgets the record, an archive marks it archived;
- with ``skills.write_approval`` on in Hermes's config.yaml, a write is staged under
  ``$HERMES_HOME/pending/skills/<id>.json`` for the person to approve with Hermes's ``/skills pending``.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import re
import shutil
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import yaml

from kindling import hermes_config
from kindling.config import hermes_home
from kindling.errors import InvalidNameError, NotFoundError, StoreError
from kindling.fileio import file_lock, write_atomic

logger = logging.getLogger(__name__)

SKILL_FILE = "SKILL.md"
NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
MAX_NAME_LENGTH = 64
MAX_DESCRIPTION_LENGTH = 1024
MAX_SKILL_CHARS = 100_000
_LOCK_NAME = ".kindling-skills"
ARCHIVE_DIR = ".archive"  # Hermes Agent's own place for retired skills; dot-dirs are never listed
# A skill's own support files live here; a SKILL.md inside them is data, not a skill (Hermes).
# Only pruned under a directory that is itself a skill: elsewhere they are ordinary categories.
SUPPORT_DIRS = frozenset({"references", "templates", "scripts", "assets"})
USAGE_FILE = ".usage.json"  # Hermes's per-skill usage sidecar, read by its curator


def skills_dir() -> Path:
    """Return Hermes's skills directory, ``$HERMES_HOME/skills``."""
    return hermes_home() / "skills"


def validate_skill_name(name: str, *, kind: str = "skill name") -> str:
    """Return ``name`` when it is a safe skill (or category) name; raise InvalidNameError if not."""
    if not isinstance(name, str) or not name:
        raise InvalidNameError(f"A {kind} is required.", name=str(name), kind=kind)
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidNameError(
            f"The {kind} '{name}' is longer than {MAX_NAME_LENGTH} characters.", name=name, kind=kind
        )
    if not NAME_RE.fullmatch(name):  # not match(): its '$' also matches before a final newline
        raise InvalidNameError(
            f"Invalid {kind} '{name}': use lowercase letters, digits, '.', '_' and '-', "
            "starting with a letter or digit.",
            name=name,
            kind=kind,
        )
    return name


def parse_front_matter(content: str) -> tuple[dict[str, Any], str]:
    """Split SKILL.md text into (front matter mapping, body).

    Raises StoreError with the reason when the front matter is missing, unclosed, not YAML,
    not a mapping, lacks ``name``/``description``, or when the body is empty.
    """
    text = content.lstrip("\ufeff")
    if not text.strip():
        raise StoreError("SKILL.md content cannot be empty.")
    if not text.startswith("---"):
        raise StoreError("SKILL.md must start with YAML front matter between '---' lines.")
    end = re.search(r"\n---[ \t]*(\n|$)", text[3:])
    if end is None:
        raise StoreError("SKILL.md front matter is not closed: add a '---' line after it.")
    try:
        meta = yaml.safe_load(text[3 : end.start() + 3])
    except yaml.YAMLError as exc:
        raise StoreError(f"SKILL.md front matter is not valid YAML: {exc}") from None
    if not isinstance(meta, dict):
        raise StoreError("SKILL.md front matter must be a YAML mapping (key: value lines).")
    for key in ("name", "description"):
        if not meta.get(key):
            raise StoreError(f"SKILL.md front matter must include '{key}'.")
    if len(str(meta["description"])) > MAX_DESCRIPTION_LENGTH:
        raise StoreError(f"The description is longer than {MAX_DESCRIPTION_LENGTH} characters.")
    body = text[end.end() + 3 :].strip()
    if not body:
        raise StoreError("SKILL.md needs instructions after the front matter.")
    return meta, body


def skill_tags(meta: dict[str, Any]) -> tuple[str, ...]:
    """Return a skill's tags as Hermes reads them: ``metadata.hermes.tags``, else top-level ``tags``.

    Either may be a YAML list, ``"[a, b]"`` or ``"a, b"``.
    """
    metadata = meta.get("metadata")
    hermes = metadata.get("hermes") if isinstance(metadata, dict) else None
    raw = (hermes.get("tags") if isinstance(hermes, dict) else None) or meta.get("tags")
    if not raw:
        return ()
    if isinstance(raw, list | tuple):
        return tuple(str(t).strip() for t in raw if t)
    text = str(raw).strip()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    return tuple(part.strip().strip("\"'") for part in text.split(",") if part.strip())


def hermes_front_matter(content: str) -> str:
    """Return ``content`` with a top-level ``tags`` moved to ``metadata.hermes.tags``.

    The rest of the front matter keeps its order and comments; content without a top-level
    ``tags`` comes back unchanged. Raises StoreError when the front matter is invalid.
    """
    from ruamel.yaml import YAML
    from ruamel.yaml.comments import CommentedMap

    meta, _ = parse_front_matter(content)
    if "tags" not in meta:
        return content
    text = content.lstrip("\ufeff")
    end = re.search(r"\n---[ \t]*(\n|$)", text[3:])
    assert end is not None  # parse_front_matter checked it
    rt = YAML(typ="rt")
    rt.preserve_quotes = True
    document = rt.load(text[3 : end.start() + 3])
    tags = document.pop("tags")
    metadata = document.get("metadata")
    if not isinstance(metadata, dict):
        metadata = document["metadata"] = CommentedMap()
    hermes = metadata.get("hermes")
    if not isinstance(hermes, dict):
        hermes = metadata["hermes"] = CommentedMap()
    if not hermes.get("tags"):
        hermes["tags"] = tags
    buffer = io.StringIO()
    rt.dump(document, buffer)
    # The closing '---' line and the body follow unchanged.
    return "---\n" + buffer.getvalue() + text[end.start() + 4 :]


def _check_name_matches(content: str, name: str) -> None:
    meta, _ = parse_front_matter(content)
    if str(meta.get("name")) != name:
        raise StoreError(
            f"The front matter name {str(meta.get('name'))!r} must equal the skill's folder name "
            f"{name!r}: Hermes lists a skill under its front matter name."
        )


@dataclass(frozen=True)
class Skill:
    """One skill on disk: its name, category, front matter fields, body and file."""

    name: str
    path: Path
    category: str | None = None
    description: str = ""
    version: str | None = None
    tags: tuple[str, ...] = ()
    content: str = ""
    meta: dict[str, Any] = field(default_factory=dict)

    def as_dict(self, *, with_content: bool = False) -> dict[str, Any]:
        """Return the skill as JSON-ready data (``content`` only when asked)."""
        data: dict[str, Any] = {
            "name": self.name,
            "category": self.category,
            "description": self.description,
            "version": self.version,
            "tags": list(self.tags),
            "path": str(self.path),
        }
        if with_content:
            data["content"] = self.content
        return data


class SkillStore:
    """The skills under one directory (default ``$HERMES_HOME/skills``)."""

    def __init__(
        self,
        root: str | Path | None = None,
        *,
        lock_timeout: float = 30.0,
        review_created: bool = True,
        write_approval: bool | None = None,
    ) -> None:
        """Open the skills under ``root``.

        ``review_created`` marks created skills in ``.usage.json`` as Hermes marks the ones its
        background review creates. ``write_approval`` None reads ``skills.write_approval`` from
        Hermes's config.yaml (raises ConfigError when that file is broken).
        """
        self.root = Path(root) if root is not None else skills_dir()
        self.lock_timeout = lock_timeout
        self.review_created = review_created
        self.write_approval = (
            write_approval if write_approval is not None else hermes_config.write_approval("skills")
        )

    @property
    def usage_path(self) -> Path:
        """Return Hermes's usage sidecar, ``.usage.json`` in the skills directory."""
        return self.root / USAGE_FILE

    @property
    def pending_dir(self) -> Path:
        """Return where gated writes are staged: ``pending/skills`` beside the skills directory."""
        return self.root.parent / "pending" / "skills"

    # -- reading ---------------------------------------------------------------------------

    def find(self, name: str) -> Path | None:
        """Return the SKILL.md of skill ``name`` (any category, any depth), or None.

        Raises InvalidNameError for an unsafe name.
        """
        validate_skill_name(name)
        direct = self.root / name / SKILL_FILE
        if direct.is_file():
            return direct
        return next((path for path in self._skill_files() if path.parent.name == name), None)

    def _skill_files(self) -> list[Path]:
        """Return every active SKILL.md under the root, sorted, walking as Hermes Agent does.

        Categories may nest (``skills/mlops/training/axolotl/SKILL.md``). Dot-directories
        (Hermes's ``.archive``, ``.hub``, VCS) and a skill's own support directories
        (``references/``, ``templates/``, ``scripts/``, ``assets/``) are skipped;
        linked directories are followed once, so a link loop cannot hang the walk.
        """
        found: list[Path] = []
        seen: set[str] = set()
        for top, dirs, files in os.walk(self.root, followlinks=True):
            real = os.path.realpath(top)
            if real in seen:
                dirs[:] = []
                continue
            seen.add(real)
            is_skill = SKILL_FILE in files and Path(top) != self.root
            dirs[:] = sorted(
                d for d in dirs if not d.startswith(".") and not (is_skill and d in SUPPORT_DIRS)
            )
            if is_skill:
                found.append(Path(top) / SKILL_FILE)
        return sorted(found, key=lambda path: path.relative_to(self.root).as_posix())

    def read(self, name: str) -> Skill:
        """Return skill ``name``. Raises InvalidNameError, NotFoundError, or StoreError."""
        path = self.find(name)
        if path is None:
            raise NotFoundError(f"No skill named '{name}' in {self.root}.", kind="skill", name=name)
        return self._load(path)

    def list(self) -> tuple[list[Skill], list[tuple[Path, str]]]:
        """Return (skills sorted by category and name, unreadable SKILL.md files with the reason).

        A broken SKILL.md is reported, never fatal and never silently dropped.
        """
        skills: list[Skill] = []
        broken: list[tuple[Path, str]] = []
        if not self.root.is_dir():
            return skills, broken
        for path in self._skill_files():
            try:
                skills.append(self._load(path))
            except StoreError as exc:
                broken.append((path, str(exc)))
        skills.sort(key=lambda s: (s.category or "", s.name))
        return skills, broken

    def _load(self, path: Path) -> Skill:
        try:
            content = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise StoreError(f"Cannot read {path}: {exc}.", path=path) from exc
        try:
            meta, _body = parse_front_matter(content)
        except StoreError as exc:
            raise StoreError(f"{path}: {exc}", path=path) from None
        relative = path.parent.relative_to(self.root)
        category = "/".join(relative.parts[:-1]) or None
        tags = skill_tags(meta)
        return Skill(
            name=path.parent.name,
            path=path,
            category=category,
            description=str(meta.get("description", "")),
            version=str(meta["version"]) if meta.get("version") is not None else None,
            tags=tags,
            content=content,
            meta=meta,
        )

    # -- tool actions ----------------------------------------------------------------------

    def view(self, name: str) -> dict[str, Any]:
        """Tool action ``view``: the skill's SKILL.md text and fields."""
        try:
            skill = self.read(name)
        except (InvalidNameError, NotFoundError, StoreError) as exc:
            return _failure(str(exc))
        return {"success": True, **skill.as_dict(with_content=True)}

    def list_result(self) -> dict[str, Any]:
        """Tool action ``list``: every skill's name, category and description."""
        skills, broken = self.list()
        result: dict[str, Any] = {
            "success": True,
            "count": len(skills),
            "skills": [
                {"name": s.name, "category": s.category, "description": s.description} for s in skills
            ],
        }
        if broken:
            result["unreadable"] = [{"path": str(p), "error": why} for p, why in broken]
        return result

    def create(self, name: str, content: str, category: str | None = None) -> dict[str, Any]:
        """Tool action ``create``: write a new skill's SKILL.md."""
        try:
            validate_skill_name(name)
            if category:
                validate_skill_name(category, kind="category")
            content = _prepared(content, name)
        except (InvalidNameError, StoreError) as exc:
            return _failure(str(exc))
        with self._locked():
            existing = self.find(name)
            if existing is not None:
                return _failure(f"A skill named '{name}' already exists at {existing}.")
            if self.write_approval:
                return self._stage("create", name, content=content, category=category)
            path = (self.root / category / name if category else self.root / name) / SKILL_FILE
            write_atomic(path, content)
        if self.review_created:
            self._update_usage(name, _mark_agent_created)
        result: dict[str, Any] = {"success": True, "message": f"Skill '{name}' created.", "path": str(path)}
        if category:
            result["category"] = category
        return result

    def edit(self, name: str, content: str) -> dict[str, Any]:
        """Tool action ``edit``: replace a skill's SKILL.md entirely."""
        try:
            content = _prepared(content, name)
            with self._locked():
                path = self._existing(name)
                if self.write_approval:
                    return self._stage("edit", name, content=content)
                write_atomic(path, content)
        except (InvalidNameError, NotFoundError, StoreError) as exc:
            return _failure(str(exc))
        self._update_usage(name, _bump_patch)
        return {"success": True, "message": f"Skill '{name}' updated.", "path": str(path)}

    def patch(self, name: str, old_string: str, new_string: str) -> dict[str, Any]:
        """Tool action ``patch``: replace the one occurrence of ``old_string`` in SKILL.md."""
        if not old_string:
            return _failure("old_string is required for 'patch'.")
        try:
            with self._locked():
                path = self._existing(name)
                text = path.read_text(encoding="utf-8")
                count = text.count(old_string)
                if count == 0:
                    return _failure(f"old_string was not found in skill '{name}'.")
                if count > 1:
                    return _failure(
                        f"old_string occurs {count} times in skill '{name}'; include more context."
                    )
                patched = text.replace(old_string, new_string, 1)
                try:
                    patched = _prepared(patched, name)
                except StoreError as exc:
                    return _failure(f"The patch would break SKILL.md: {exc}")
                if self.write_approval:
                    return self._stage("patch", name, old_string=old_string, new_string=new_string)
                write_atomic(path, patched)
        except (InvalidNameError, NotFoundError, StoreError) as exc:
            return _failure(str(exc))
        except OSError as exc:
            return _failure(f"Cannot read skill '{name}': {exc.strerror or exc}.")
        self._update_usage(name, _bump_patch)
        return {"success": True, "message": f"Skill '{name}' patched.", "path": str(path)}

    def delete(self, name: str, *, archive: bool = False) -> dict[str, Any]:
        """Tool action ``delete``: remove the skill's directory (and an emptied category).

        With ``archive`` the directory is moved to ``.archive/<name>-<time>`` under the root
        instead, where neither Hermes Agent nor kindling lists it and a person can restore it.
        """
        try:
            with self._locked():
                skill_dir = self._existing(name).parent
                root = self.root.resolve()
                resolved = skill_dir.resolve()
                # Never follow a link out of the skills tree into someone else's files.
                if skill_dir.is_symlink() or root not in resolved.parents:
                    return _failure(f"Refusing to delete '{skill_dir}': it is not a directory inside {root}.")
                if self.write_approval:
                    return self._stage("delete", name)
                archived: Path | None = None
                if archive:
                    archive_root = self.root / ARCHIVE_DIR
                    archive_root.mkdir(parents=True, exist_ok=True)
                    archived = _unused(archive_root / f"{name}-{time.strftime('%Y%m%dT%H%M%S')}")
                    os.replace(skill_dir, archived)
                else:
                    shutil.rmtree(skill_dir)
                parent = skill_dir.parent
                if parent != self.root and not any(parent.iterdir()):
                    parent.rmdir()
        except (InvalidNameError, NotFoundError, StoreError) as exc:
            return _failure(str(exc))
        except OSError as exc:
            return _failure(f"Cannot delete skill '{name}': {exc.strerror or exc}.")
        # Hermes keeps an archived skill's record (state archived) and forgets a deleted one.
        self._update_usage(name, _mark_archived if archived is not None else None)
        if archived is not None:
            return {
                "success": True,
                "message": f"Skill '{name}' archived.",
                "archived_to": str(archived),
            }
        return {"success": True, "message": f"Skill '{name}' deleted."}

    def usage(self) -> dict[str, dict[str, Any]]:
        """Return ``.usage.json`` (empty when missing; a broken file reads as empty, as in Hermes)."""
        try:
            data = json.loads(self.usage_path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            logger.warning("Ignoring unreadable %s: %s", self.usage_path, exc)
            return {}
        if not isinstance(data, dict):
            return {}
        return {str(k): v for k, v in data.items() if isinstance(v, dict)}

    def _update_usage(self, name: str, change: Callable[[dict[str, Any]], None] | None) -> None:
        """Apply ``change`` to the skill's usage record (None drops the record).

        Uses Hermes's own lock file for the sidecar (``.usage.json.lock``), so kindling and Hermes
        never overwrite each other's counters. Telemetry never fails a skill write: a problem is logged.
        """
        try:
            with file_lock(self.usage_path, timeout=self.lock_timeout):
                data = self.usage()
                if change is None:
                    if name not in data:
                        return
                    del data[name]
                else:
                    record = {**_empty_usage_record(), **data.get(name, {})}
                    change(record)
                    data[name] = record
                text = json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False)
                write_atomic(self.usage_path, text)
        except StoreError as exc:
            logger.warning("Could not update %s for skill %r: %s", self.usage_path, name, exc)

    def _stage(self, action: str, name: str, **payload: str | None) -> dict[str, Any]:
        """Stage a write as Hermes's pending record, replayable by its ``/skills approve``."""
        pending_id = uuid.uuid4().hex[:8]
        body = {"action": action, "name": name, **{k: v for k, v in payload.items() if v is not None}}
        gist = f"{action} skill '{name}'"
        record = {
            "id": pending_id,
            "subsystem": "skills",
            "action": action,
            "summary": gist,
            "origin": "background_review" if self.review_created else "foreground",
            "created_at": time.time(),
            "payload": body,
        }
        write_atomic(
            self.pending_dir / f"{pending_id}.json", json.dumps(record, ensure_ascii=False, indent=2)
        )
        return {
            "success": True,
            "staged": True,
            "pending_id": pending_id,
            "gist": gist,
            "message": (
                "Staged for approval (skills.write_approval is on in Hermes's config.yaml). "
                "Not yet saved: review it in Hermes with /skills pending."
            ),
        }

    def _existing(self, name: str) -> Path:
        path = self.find(name)
        if path is None:
            raise NotFoundError(
                f"Skill '{name}' not found. Use action 'list' to see skills.", kind="skill", name=name
            )
        return path

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        with file_lock(self.root / _LOCK_NAME, timeout=self.lock_timeout):
            yield


def _unused(path: Path) -> Path:
    """Return ``path``, or ``path.1``, ``path.2``, ... when it is taken (two archives in a second)."""
    candidate, index = path, 0
    while candidate.exists():
        index += 1
        candidate = path.with_name(f"{path.name}.{index}")
    return candidate


def _now_iso() -> str:
    return datetime.now(timezone.utc).isoformat()


def _empty_usage_record() -> dict[str, Any]:
    """A fresh usage record with every field Hermes's curator reads."""
    return {
        "created_by": None,
        "use_count": 0,
        "view_count": 0,
        "last_used_at": None,
        "last_viewed_at": None,
        "patch_count": 0,
        "last_patched_at": None,
        "created_at": _now_iso(),
        "state": "active",
        "pinned": False,
        "archived_at": None,
    }


def _mark_agent_created(record: dict[str, Any]) -> None:
    record["created_by"] = "agent"


def _bump_patch(record: dict[str, Any]) -> None:
    record["patch_count"] = int(record.get("patch_count") or 0) + 1
    record["last_patched_at"] = _now_iso()


def _mark_archived(record: dict[str, Any]) -> None:
    record["state"] = "archived"
    record["archived_at"] = _now_iso()


def _prepared(content: str, name: str) -> str:
    """Check ``content`` for skill ``name`` and return it in Hermes's form (tags under metadata)."""
    _check_content(content)
    _check_name_matches(content, name)
    return hermes_front_matter(content)


def _check_content(content: str) -> None:
    if not isinstance(content, str):
        raise StoreError("content must be text.")
    if len(content) > MAX_SKILL_CHARS:
        raise StoreError(
            f"SKILL.md is {len(content):,} characters; the limit is {MAX_SKILL_CHARS:,}. Keep skills focused."
        )
    parse_front_matter(content)


def _failure(message: str) -> dict[str, Any]:
    return {"success": False, "error": message}
