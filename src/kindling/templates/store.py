"""Where templates live: one JSON file per template (default) or SQL tables (SQLite or PostgreSQL).

Both stores share one interface (``TemplateStore``): ``save`` bumps the version of an existing name
and keeps every earlier version retrievable; ``record_use`` adds one to ``usage_count`` so that
concurrent users from several processes never lose an increment (a file lock for JSON files, a
single ``UPDATE ... SET usage_count = usage_count + 1`` for SQL). A corrupt template is reported in
``store.problems`` and skipped while the others load; callers show those problems (the CLI on
stderr, the agent tool in its result), so the log records them only at INFO and nothing prints twice.
"""

from __future__ import annotations

import abc
import builtins
import logging
import os
import re
import shutil
import threading
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError

from kindling.config import env_str, templates_dir
from kindling.db import apply_migrations, create_engine, is_url, redact_url, translate_errors
from kindling.errors import KindlingError, NotFoundError, StoreError, TemplateError
from kindling.fileio import file_lock, write_atomic
from kindling.templates.model import (
    Template,
    detect_template_format,
    parse_template,
    utc_now,
    validate_name,
)

__all__ = [
    "DEFAULT_TENANT",
    "JsonDirStore",
    "SqlStore",
    "StoreProblem",
    "TemplateStore",
    "TenantTemplates",
    "open_store",
    "owner_of",
    "read_template_file",
    "visible_to",
]

log = logging.getLogger(__name__)

SQL_SUFFIXES = (".db", ".sqlite", ".sqlite3")
#: The tenant a template without one belongs to (the proxy's tenant without tenant tokens).
DEFAULT_TENANT = "default"
#: The key of a stored template's summary for choosing (a template ignores it when parsed).
SUMMARY_KEY = "choice_summary"


@dataclass(frozen=True)
class StoreProblem:
    """A template the store could not load: where it is and why (one sentence)."""

    location: str
    reason: str


class TemplateStore(abc.ABC):
    """The interface every template store implements."""

    problems: list[StoreProblem]

    @property
    @abc.abstractmethod
    def location(self) -> str:
        """Where the store keeps its data (a directory or a redacted database URL)."""

    @abc.abstractmethod
    def save(self, template: Template) -> Template:
        """Store ``template`` and return it as stored (version, timestamps and usage set by the store).

        Saving an existing name bumps its version and keeps the earlier one retrievable.
        Raises InvalidNameError for an unsafe name and StoreError when the store fails.
        """

    @abc.abstractmethod
    def get(self, name: str, version: int | None = None) -> Template:
        """Return the current template ``name`` (or one of its earlier versions).

        Raises NotFoundError when absent, TemplateError when its stored data is corrupt.
        """

    @abc.abstractmethod
    def list(self) -> list[Template]:
        """Return every loadable template (current versions) sorted by name.

        Templates that cannot be loaded are skipped and described in ``self.problems``. The list
        and its templates may be shared with other callers in the process: read them, never change
        them (``model_copy`` makes a changed template).
        """

    @abc.abstractmethod
    def versions(self, name: str) -> builtins.list[int]:
        """Return the stored version numbers of ``name``, oldest first. Raises NotFoundError."""

    @abc.abstractmethod
    def delete(self, name: str) -> None:
        """Delete ``name`` with all its versions. Raises NotFoundError when absent."""

    @abc.abstractmethod
    def record_use(self, name: str) -> int:
        """Add one to ``name``'s usage count and return the new count. Raises NotFoundError."""

    def exists(self, name: str) -> bool:
        """True when a template called ``name`` is stored."""
        try:
            self.get(name)
        except NotFoundError:
            return False
        except TemplateError:
            return True
        return True


@contextmanager
def _reading(path: Path, name: str) -> Iterator[None]:
    """Turn a failed read of template ``name``'s file into kindling's errors: missing is not found."""
    try:
        yield
    except FileNotFoundError:
        raise _not_found(name) from None
    except OSError as exc:
        raise StoreError(f"Cannot read {path}: {exc.strerror or exc}.", path=path) from exc


def _not_found(name: str, version: int | None = None) -> NotFoundError:
    what = f"Template {name!r}" if version is None else f"Version {version} of template {name!r}"
    return NotFoundError(f"{what} does not exist.", kind="template", name=name)


def _dumps(template: Template) -> bytes:
    # What choosing a template needs is kept with it (a compact JSON text; kindling.templates.index),
    # so a process that reads the store need not summarise every template's past tasks again.
    from kindling.templates.index import stored_summary

    data = template.model_dump(mode="json")
    data[SUMMARY_KEY] = stored_summary(template)
    return orjson.dumps(data, option=orjson.OPT_INDENT_2)


# The top-level usage count in a file kindling wrote (orjson, two-space indent: top-level keys are
# the only lines that start with exactly two spaces and a quote; newlines inside strings are escaped).
_USAGE_LINE = re.compile(rb'^  "usage_count": (\d+)(,?)$', re.MULTILINE)


def _count_use_in_place(raw: bytes) -> tuple[int, bytes] | None:
    """The new count and the file's bytes with its usage count one higher, or None when the file
    is not one kindling wrote that way (then it is parsed and written as a whole)."""
    if not raw.startswith(b'{\n  "schema_version": '):
        return None
    found = list(_USAGE_LINE.finditer(raw))
    if len(found) != 1:
        return None
    match = found[0]
    count = int(match.group(1)) + 1
    line = b'  "usage_count": ' + str(count).encode() + match.group(2)
    return count, raw[: match.start()] + line + raw[match.end() :]


def _parsed(data: Any, *, name: str) -> Template:
    """The template in parsed JSON ``data``, with the summary for choosing the store kept beside it."""
    template = parse_template(data, name=name)
    if isinstance(data, dict) and SUMMARY_KEY in data:
        from kindling.templates.index import adopt_stored_summary

        adopt_stored_summary(template, data[SUMMARY_KEY])
    return template


def _loads(raw: bytes | str, *, name: str, where: str) -> Template:
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise TemplateError(f"{where} is not valid JSON: {exc}.", template=name) from exc
    return _parsed(data, name=name)


# Templates parsed from files in this process, by (path, name): the file's (mtime_ns, size, inode)
# when parsed, and the template. Shared by every JsonDirStore, so a caller that opens the store
# anew for each warm-up (the Hermes plugin) reuses them too. Templates from a store are read-only
# to their callers (``model_copy`` makes a changed one).
_PARSED: OrderedDict[tuple[str, str], tuple[tuple[int, int, int], Template]] = OrderedDict()
_PARSED_SIZE = 256
_PARSED_LOCK = threading.Lock()


# The last list of each directory, with the stamps of its files then (and whether any failed to
# load: a listing with problems is read again, so that its problems are reported every time).
_LISTED: dict[str, tuple[tuple[tuple[str, int, int, int], ...], list[Template], bool]] = {}
# The same for SQL stores, by (database, name, version, and the stored text's length and hash).
_SQL_PARSED: OrderedDict[tuple[Any, ...], Template] = OrderedDict()


def _remember(key: tuple[str, str], stamp: tuple[int, int, int], template: Template) -> None:
    with _PARSED_LOCK:
        _PARSED[key] = (stamp, template)
        _PARSED.move_to_end(key)
        while len(_PARSED) > _PARSED_SIZE:
            _PARSED.popitem(last=False)


class JsonDirStore(TemplateStore):
    """One ``<name>.json`` per template in a directory; earlier versions in ``<name>.versions/<n>.json``.

    Every write is atomic (temp file, fsync, rename) and made under a per-template file lock, so a
    reader never sees half a file and a killed writer leaves the previous version in place. The
    directory may also hold files in either legacy format; they load like native ones.
    """

    def __init__(self, root: str | Path | None = None) -> None:
        self.root = Path(root).expanduser() if root is not None else templates_dir()
        self.problems: list[StoreProblem] = []

    @property
    def location(self) -> str:
        """The template directory."""
        return str(self.root)

    def path_for(self, name: str) -> Path:
        """Return the file of template ``name`` (validated: InvalidNameError when unsafe)."""
        return self.root / f"{validate_name(name)}.json"

    def _versions_dir(self, name: str) -> Path:
        return self.root / f"{validate_name(name)}.versions"

    def _read(self, path: Path, name: str) -> Template:
        # A file that has not changed since this process last parsed it (same modification time,
        # size and inode; every write replaces the file) is not parsed again: a long-running warm-up
        # lists the whole store per new session, and parsing a template from thousands of sessions
        # costs a large part of a second.
        with _reading(path, name):
            info = path.stat()
        stamp = (info.st_mtime_ns, info.st_size, info.st_ino)
        key = (str(path), name)
        with _PARSED_LOCK:
            seen = _PARSED.get(key)
            if seen is not None and seen[0] == stamp:
                _PARSED.move_to_end(key)
                return seen[1]
        template = self._read_with_format(path, name)[0]
        _remember(key, stamp, template)
        return template

    def _read_with_format(self, path: Path, name: str) -> tuple[Template, str, bytes]:
        with _reading(path, name):
            raw = path.read_bytes()
        try:
            data = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise TemplateError(f"{path} is not valid JSON: {exc}.", template=name) from exc
        fmt = detect_template_format(data)
        if isinstance(data, dict) and data.get("name") != name:
            # The file name addresses the template; legacy files may carry another (even unsafe) name.
            data = {**data, "name": name}
        return _parsed(data, name=name), fmt, raw

    def _keep_legacy_original(self, name: str, fmt: str, raw: bytes) -> None:
        # The first kindling write turns a legacy file into kindling's format, which the legacy
        # loaders reject: keep the file as it was, once, so nothing the old tool wrote is lost.
        if fmt == "kindling":
            return
        original = self._versions_dir(name) / f"original-{fmt}.json"
        if not original.exists():
            write_atomic(original, raw)

    def save(self, template: Template) -> Template:
        """Write ``template`` atomically under its lock; an existing name gets the next version.

        A corrupt current file is copied into the versions directory, noted in ``problems``, and
        replaced.
        """
        path = self.path_for(template.name)
        with file_lock(path):
            now = utc_now()
            previous: Template | None = None
            if path.exists():
                try:
                    previous, fmt, raw = self._read_with_format(path, template.name)
                    self._keep_legacy_original(template.name, fmt, raw)
                except TemplateError as exc:
                    # Keep the unreadable bytes beside the versions instead of overwriting them.
                    keep = self._versions_dir(template.name) / f"corrupt-{now.replace(':', '')}.json"
                    write_atomic(keep, path.read_bytes())
                    log.warning("%s; kept a copy at %s", exc, keep)
                    # Library logs may go nowhere; the caller reads problems and tells the user.
                    self.problems.append(StoreProblem(str(path), f"{exc} A copy was kept at {keep}."))
            if previous is not None:
                write_atomic(self._versions_dir(template.name) / f"{previous.version}.json", _dumps(previous))
                stored = template.model_copy(
                    update={
                        "version": previous.version + 1,
                        "usage_count": previous.usage_count,
                        "created_at": previous.created_at,
                        "updated_at": now,
                    }
                )
            else:
                # After a corrupt current file the earlier versions are still on disk: number past
                # them, or the next save would overwrite one of them with this template.
                floor = max(self._old_versions(template.name), default=0) + 1
                stored = template.model_copy(
                    update={"version": max(template.version, floor), "updated_at": now}
                )
            write_atomic(path, _dumps(stored))
        return stored

    def get(self, name: str, version: int | None = None) -> Template:
        """Return template ``name``, or its ``version``; NotFoundError/TemplateError as documented."""
        path = self.path_for(name)
        current = self._read(path, name)
        if version is None or version == current.version:
            return current
        old = self._versions_dir(name) / f"{int(version)}.json"
        if not old.is_file():
            raise _not_found(name, version)
        return self._read(old, name)

    def list(self) -> list[Template]:
        """Return every loadable template; unloadable files are listed in ``problems``.

        While no file has changed since this process last listed the directory, the same list
        (of the same template objects) is returned: what is built per template list (the index
        that chooses among them) is then reused as it is.
        """
        self.problems = []
        try:
            entries = sorted(
                (entry.name, entry.stat())
                for entry in os.scandir(self.root)
                if entry.name.endswith(".json") and not entry.name.startswith(".") and entry.is_file()
            )
        except (FileNotFoundError, NotADirectoryError):
            return []
        except OSError as exc:
            raise StoreError(f"Cannot read {self.root}: {exc.strerror or exc}.", path=self.root) from exc
        stamps = tuple((name, info.st_mtime_ns, info.st_size, info.st_ino) for name, info in entries)
        key = str(self.root)
        with _PARSED_LOCK:
            seen = _LISTED.get(key)
        if seen is not None and seen[0] == stamps and not seen[2]:
            return seen[1]
        templates: list[Template] = []
        for name, _info in entries:
            path = self.root / name
            try:
                templates.append(self._read(path, path.stem))
            except KindlingError as exc:
                self.problems.append(StoreProblem(str(path), str(exc)))
                log.info("Skipped template file %s: %s", path, exc)
        templates.sort(key=lambda t: t.name)
        with _PARSED_LOCK:
            _LISTED[key] = (stamps, templates, bool(self.problems))
            while len(_LISTED) > _PARSED_SIZE:
                _LISTED.pop(next(iter(_LISTED)))
        return templates

    def versions(self, name: str) -> builtins.list[int]:
        """Return the stored versions of ``name``, oldest first."""
        current = self.get(name)
        return sorted({current.version, *self._old_versions(name)})

    def _old_versions(self, name: str) -> set[int]:
        vdir = self._versions_dir(name)
        if not vdir.is_dir():
            return set()
        return {int(p.stem) for p in vdir.glob("*.json") if p.stem.isdigit()}

    def delete(self, name: str) -> None:
        """Remove ``name`` and its earlier versions."""
        path = self.path_for(name)
        with file_lock(path):
            if not path.exists():
                raise _not_found(name)
            try:
                path.unlink()
                shutil.rmtree(self._versions_dir(name), ignore_errors=True)
            except OSError as exc:
                raise StoreError(f"Cannot delete {path}: {exc.strerror or exc}.", path=path) from exc
        # The lock file stays: removing it could let a waiting process and a new one both "hold" it.

    def record_use(self, name: str) -> int:
        """Increment ``usage_count`` under the template's lock and return the new count.

        A file kindling wrote has its count changed in place in its bytes (one top-level line),
        not parsed and written out again: a use of a template from thousands of sessions costs a
        file write, not a second of JSON. Anything else is read and written as a whole.
        """
        path = self.path_for(name)
        with file_lock(path):
            with _reading(path, name):
                raw = path.read_bytes()
            counted = _count_use_in_place(raw)
            if counted is not None:
                count, changed = counted
                write_atomic(path, changed)
                self._after_use(path, name, count)
                return count
            current, fmt, raw = self._read_with_format(path, name)
            self._keep_legacy_original(name, fmt, raw)
            updated = current.model_copy(update={"usage_count": current.usage_count + 1})
            write_atomic(path, _dumps(updated))
        return updated.usage_count

    def _after_use(self, path: Path, name: str, count: int) -> None:
        # The parsed template this process holds is still right but for its count: keep it, under
        # the file's new stamp (still under the lock, so no other write came between).
        key = (str(path), name)
        with _PARSED_LOCK:
            seen = _PARSED.get(key)
        if seen is None:
            return
        info = path.stat()
        _remember(
            key,
            (info.st_mtime_ns, info.st_size, info.st_ino),
            seen[1].model_copy(update={"usage_count": count}),
        )


_metadata = sa.MetaData()
templates_table = sa.Table(
    "kindling_templates",
    _metadata,
    sa.Column("name", sa.String(64), primary_key=True),
    sa.Column("version", sa.Integer, nullable=False),
    sa.Column("usage_count", sa.Integer, nullable=False, server_default="0"),
    sa.Column("created_at", sa.String(40), nullable=False),
    sa.Column("updated_at", sa.String(40), nullable=False),
)
versions_table = sa.Table(
    "kindling_template_versions",
    _metadata,
    sa.Column("name", sa.String(64), primary_key=True),
    sa.Column("version", sa.Integer, primary_key=True),
    sa.Column("data", sa.Text, nullable=False),
    sa.Column("saved_at", sa.String(40), nullable=False),
)


def m001_initial(conn: Connection) -> None:
    """Create the current-template and template-version tables."""
    _metadata.create_all(conn, checkfirst=True)


MIGRATIONS = (m001_initial,)


class SqlStore(TemplateStore):
    """Templates in SQL: ``kindling_templates`` (current version, usage) + ``kindling_template_versions``.

    ``target`` is a SQLite file path or a ``sqlite://``/``postgresql://`` URL. Several processes and
    hosts can share one database: version bumps and usage increments are single conditional
    UPDATEs, which the database serializes.
    """

    def __init__(self, target: str | Path, *, engine: Engine | None = None) -> None:
        self.target = target
        self.engine = engine or create_engine(target)
        self.problems: list[StoreProblem] = []
        with translate_errors(target, "migrate"):
            apply_migrations(self.engine, "templates", MIGRATIONS)

    @property
    def location(self) -> str:
        """The database (password redacted)."""
        return redact_url(self.target)

    def close(self) -> None:
        """Release the database connections."""
        self.engine.dispose()

    def save(self, template: Template) -> Template:
        """Store ``template`` as the next version of its name, in one transaction."""
        validate_name(template.name)
        for _attempt in range(5):
            try:
                with translate_errors(self.target, "save a template in"), self.engine.begin() as conn:
                    return self._save(conn, template)
            except StoreError as exc:
                # Two first saves of one name race on the INSERT; the loser retries as an update.
                if isinstance(exc.__cause__, IntegrityError):
                    continue
                raise
        raise StoreError(f"Cannot save template {template.name!r}: too much contention.", path=self.location)

    def _save(self, conn: Connection, template: Template) -> Template:
        t = templates_table
        now = utc_now()
        # The UPDATE comes first so the row (or, on SQLite, the database) is write-locked before
        # we read the version back: two savers can never get the same number.
        bumped = conn.execute(
            t.update().where(t.c.name == template.name).values(version=t.c.version + 1, updated_at=now)
        )
        if bumped.rowcount == 0:
            conn.execute(
                t.insert().values(
                    name=template.name,
                    version=max(template.version, 1),
                    usage_count=template.usage_count,
                    created_at=template.created_at,
                    updated_at=now,
                )
            )
        row = conn.execute(
            sa.select(t.c.version, t.c.usage_count, t.c.created_at).where(t.c.name == template.name)
        ).one()
        stored = template.model_copy(
            update={
                "version": row.version,
                "usage_count": row.usage_count,
                "created_at": row.created_at,
                "updated_at": now,
            }
        )
        conn.execute(
            versions_table.insert().values(
                name=stored.name, version=stored.version, data=_dumps(stored).decode("utf-8"), saved_at=now
            )
        )
        return stored

    def _row_to_template(self, name: str, version: int, data: str, usage_count: int) -> Template:
        stored = _loads(data, name=name, where=f"{self.location} (template {name!r} v{version})")
        return stored.model_copy(update={"usage_count": usage_count})

    def get(self, name: str, version: int | None = None) -> Template:
        """Return template ``name`` (current or ``version``) with its live usage count."""
        validate_name(name)
        t, v = templates_table, versions_table
        with translate_errors(self.target, "read"), self.engine.connect() as conn:
            current = conn.execute(
                sa.select(t.c.version, t.c.usage_count).where(t.c.name == name)
            ).one_or_none()
            if current is None:
                raise _not_found(name)
            wanted = current.version if version is None else int(version)
            data = conn.execute(
                sa.select(v.c.data).where(v.c.name == name, v.c.version == wanted)
            ).scalar_one_or_none()
        if data is None:
            raise _not_found(name, version)
        return self._row_to_template(name, wanted, data, current.usage_count)

    def list(self) -> list[Template]:
        """Return every loadable current template; corrupt rows are listed in ``problems``.

        A version this process has parsed before (the same stored text) is not parsed again; only
        its usage count is taken from the row.
        """
        self.problems = []
        t, v = templates_table, versions_table
        query = (
            sa.select(t.c.name, t.c.version, t.c.usage_count, v.c.data)
            .join(v, sa.and_(v.c.name == t.c.name, v.c.version == t.c.version), isouter=True)
            .order_by(t.c.name)
        )
        with translate_errors(self.target, "read"), self.engine.connect() as conn:
            rows = conn.execute(query).all()
        templates: list[Template] = []
        for row in rows:
            where = f"{self.location} (template {row.name!r} v{row.version})"
            if row.data is None:
                self.problems.append(StoreProblem(where, "its current version's data is missing"))
                continue
            key = (str(self.target), row.name, row.version, len(row.data), hash(row.data))
            with _PARSED_LOCK:
                template = _SQL_PARSED.get(key)
                if template is not None:
                    _SQL_PARSED.move_to_end(key)
            if template is None:
                try:
                    template = self._row_to_template(row.name, row.version, row.data, row.usage_count)
                except KindlingError as exc:
                    self.problems.append(StoreProblem(where, str(exc)))
                    log.info("Skipped %s: %s", where, exc)
                    continue
                with _PARSED_LOCK:
                    _SQL_PARSED[key] = template
                    while len(_SQL_PARSED) > _PARSED_SIZE:
                        _SQL_PARSED.popitem(last=False)
            if template.usage_count != row.usage_count:
                template = template.model_copy(update={"usage_count": row.usage_count})
            templates.append(template)
        return templates

    def versions(self, name: str) -> builtins.list[int]:
        """Return the stored versions of ``name``, oldest first."""
        validate_name(name)
        v = versions_table
        with translate_errors(self.target, "read"), self.engine.connect() as conn:
            found = conn.execute(sa.select(v.c.version).where(v.c.name == name).order_by(v.c.version)).all()
        if not found:
            raise _not_found(name)
        return [r.version for r in found]

    def delete(self, name: str) -> None:
        """Delete ``name`` and all its versions in one transaction."""
        validate_name(name)
        with translate_errors(self.target, "delete from"), self.engine.begin() as conn:
            gone = conn.execute(templates_table.delete().where(templates_table.c.name == name))
            conn.execute(versions_table.delete().where(versions_table.c.name == name))
        if gone.rowcount == 0:
            raise _not_found(name)

    def record_use(self, name: str) -> int:
        """Increment ``usage_count`` with one atomic UPDATE and return the new count."""
        validate_name(name)
        t = templates_table
        with translate_errors(self.target, "update"), self.engine.begin() as conn:
            done = conn.execute(t.update().where(t.c.name == name).values(usage_count=t.c.usage_count + 1))
            if done.rowcount == 0:
                raise _not_found(name)
            count: int = conn.execute(sa.select(t.c.usage_count).where(t.c.name == name)).scalar_one()
        return count


def owner_of(template: Template) -> str:
    """The tenant whose experience ``template`` holds (one without a tenant is the default tenant's)."""
    return template.tenant or DEFAULT_TENANT


def visible_to(template: Template, tenant: str) -> bool:
    """True when ``tenant`` may warm from ``template``: its own, or one an admin shared."""
    return template.shared or owner_of(template) == tenant


class TenantTemplates(TemplateStore):
    """What one tenant sees of ``store``: its own templates and the shared ones, nothing else.

    ``list`` and ``get`` answer as the store does for those templates; a template of another
    tenant that is not shared is, for this view, not there (NotFoundError). ``record_use`` and
    ``versions`` work on visible templates only; ``save`` and ``delete`` are refused (a view
    changes nothing). The filtered list is kept while the store answers with the same list object
    (``CachedTemplates`` does, between its reads), so the view costs a comparison per call.
    """

    def __init__(self, store: TemplateStore, tenant: str) -> None:
        self.store = store
        self.tenant = validate_name(tenant, kind="tenant")
        self.problems = []
        self._from: builtins.list[Template] | None = None
        self._visible: builtins.list[Template] = []

    @property
    def location(self) -> str:
        """The wrapped store's location."""
        return self.store.location

    def list(self) -> builtins.list[Template]:
        """The templates this tenant may warm from, sorted by name."""
        templates = self.store.list()
        self.problems = list(self.store.problems)
        if templates is not self._from:
            self._visible = [t for t in templates if visible_to(t, self.tenant)]
            self._from = templates
        return self._visible

    def get(self, name: str, version: int | None = None) -> Template:
        """Template ``name`` when this tenant may see it; NotFoundError otherwise."""
        template = self.store.get(name, version)
        if not visible_to(template, self.tenant):
            raise NotFoundError(
                f"Template {name!r} does not exist for tenant {self.tenant!r}.", kind="template", name=name
            )
        return template

    def versions(self, name: str) -> builtins.list[int]:
        """The versions of a visible template."""
        self.get(name)
        return self.store.versions(name)

    def record_use(self, name: str) -> int:
        """Count a use of a visible template."""
        self.get(name)
        return self.store.record_use(name)

    def save(self, template: Template) -> Template:
        """Refused: a tenant's view of the store changes nothing."""
        raise StoreError(f"A tenant's view of {self.location} cannot save templates.", path=self.location)

    def delete(self, name: str) -> None:
        """Refused: a tenant's view of the store changes nothing."""
        raise StoreError(f"A tenant's view of {self.location} cannot delete templates.", path=self.location)


def read_template_file(path: str | Path, *, name: str | None = None) -> Template:
    """Return the template in a JSON file (kindling's format or either legacy format).

    A file without a name inside is named after the file; ``name`` renames the template.
    Raises TemplateError when the file cannot be read or is not a template, InvalidNameError when
    its name (or ``name``) is unsafe.
    """
    source = Path(path)
    try:
        raw = source.read_bytes()
    except OSError as exc:
        raise TemplateError(f"Cannot read {source}: {exc.strerror or exc}.") from exc
    template = _loads(raw, name=source.stem, where=str(source))
    if name is not None:
        template = template.model_copy(update={"name": validate_name(name)})
    return template


def open_store(target: str | Path | None = None) -> TemplateStore:
    """Open the template store named by ``target``.

    ``None`` means ``$KINDLING_TEMPLATE_STORE`` or, when unset, a JsonDirStore at
    ``$KINDLING_HOME/templates``. A ``sqlite://``/``postgresql://`` URL or a path ending in
    ``.db``/``.sqlite``/``.sqlite3`` opens a SqlStore; any other path is a JSON directory.
    Raises StoreError when the database cannot be opened.
    """
    if target is None or target == "":
        configured = env_str("KINDLING_TEMPLATE_STORE", "")
        if not configured:
            return JsonDirStore(templates_dir())
        target = configured
    if is_url(target):
        return SqlStore(str(target))
    path = Path(os.fspath(target)).expanduser()
    if path.suffix.lower() in SQL_SUFFIXES:
        return SqlStore(path)
    if path.is_file():
        raise StoreError(f"{path} is a file; a template store is a directory or a .db file.", path=path)
    return JsonDirStore(path)


def store_info(store: TemplateStore) -> dict[str, Any]:
    """Return what ``kindling templates path`` shows: the store kind and location."""
    kind = "sql" if isinstance(store, SqlStore) else "json"
    return {"kind": kind, "location": store.location}
