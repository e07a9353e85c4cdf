"""The file backend: files a run produced, kept in a directory beside the store (seed 000's ``file_backend``).

Owns: ``DirectoryFiles`` (each file under its id, with its real filename and size in a
small JSON record beside it), ``StoredFile`` (what is known of one), ``check_file_id`` (an
id is a plain name: no path, no escape) and ``file_url`` (where the server serves it,
spec ``spec/server.md`` §FS). Does not own: serving (``server/files.py``), or finding the
files a run produced (``store/record.collect_files``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

__all__ = [
    "FILES_PATH",
    "FILE_ID_PATTERN",
    "DirectoryFiles",
    "FileIdError",
    "StoredFile",
    "check_file_id",
    "file_url",
    "files_api_fetch",
    "keep_files",
]

log = logging.getLogger("agent_ref")

#: Gets a produced file's real filename and bytes by its id.
Fetch = Callable[[str], Awaitable[tuple[str, bytes]]]

#: A file id: letters, digits, ``_`` and ``-``, 1 to 128 of them (the Files API's ids are ``file_...``).
FILE_ID_PATTERN: Final = re.compile(r"[A-Za-z0-9_-]{1,128}")
#: The server's path prefix of stored files ([FS1-a]).
FILES_PATH: Final = "/files"
#: The longest filename kept (bytes of UTF-8, as most file systems allow).
_MAX_NAME_BYTES: Final = 255


class FileIdError(ValueError):
    """A file id that is not a plain name (a path, ``..``, an empty or over-long id)."""


@dataclass(frozen=True, slots=True)
class StoredFile:
    """One stored file.

    Attributes:
        file_id: its id.
        filename: its real name (a base name: no directory part).
        size: its length in bytes.
        path: where its bytes are.
        principal: who owns it: the principal of the run that produced it (spec server
            [FS2-a]); ``None`` when none was recorded (a file kept before owners were, or
            by an agent with no principal).
        run_id: the run that produced it, when recorded.
    """

    file_id: str
    filename: str
    size: int
    path: Path
    principal: str | None = None
    run_id: str | None = None


def check_file_id(file_id: str) -> str:
    """``file_id`` if it is a plain name ([FS1-b]).

    Raises:
        FileIdError: naming what is wrong.
    """
    if not isinstance(file_id, str) or not FILE_ID_PATTERN.fullmatch(file_id):
        shown = repr(file_id)[:80]
        raise FileIdError(f"file id {shown} is not 1-128 letters, digits, '_' or '-'")
    return file_id


def file_url(file_id: str) -> str:
    """The server path a stored file is served at ([FS1-a])."""
    return f"{FILES_PATH}/{check_file_id(file_id)}"


def _clean_name(filename: str, file_id: str) -> str:
    """The base name of ``filename``, without control characters and within 255 bytes; ``file_id`` if none is left."""
    base = re.split(r"[\\/]", filename)[-1]
    base = "".join(ch for ch in base if ch.isprintable()).strip()
    if base in ("", ".", ".."):
        return file_id
    while len(base.encode()) > _MAX_NAME_BYTES:
        base = base[:-1]
    return base


class DirectoryFiles:
    """Files kept in ``root``: ``<id>`` holds the bytes, ``<id>.json`` the filename and size.

    Args:
        root: the directory (made if missing), e.g. beside the SQLite file of the store.
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        """Keep files under ``root``."""
        self.root = Path(root)

    def _put(self, file_id: str, filename: str, data: bytes, principal: str | None, run_id: str | None) -> StoredFile:
        self.root.mkdir(parents=True, exist_ok=True)
        name = _clean_name(filename, file_id)
        path = self.root / file_id
        partial = self.root / f".{file_id}.partial"
        partial.write_bytes(data)
        os.replace(partial, path)  # a reader never sees half a file
        record: dict[str, Any] = {"filename": name, "size": len(data)}
        if principal is not None:  # spec server [FS2-a]: the owner beside the bytes
            record["principal"] = principal
        if run_id is not None:
            record["run_id"] = run_id
        meta = self.root / f".{file_id}.json.partial"
        meta.write_text(json.dumps(record, ensure_ascii=False), encoding="utf-8")
        os.replace(meta, self.root / f"{file_id}.json")
        return StoredFile(file_id, name, len(data), path, principal, run_id)

    async def put(
        self, file_id: str, filename: str, data: bytes, *, principal: str | None = None, run_id: str | None = None
    ) -> StoredFile:
        """Store ``data`` as ``file_id`` named ``filename`` (its base name); replaces one stored before.

        ``principal`` and ``run_id`` (the producing run's owner and id) are recorded beside
        it; the server serves the file only to that principal or an admin (spec server [FS2-a]).

        Raises:
            FileIdError: ``file_id`` is not a plain name.
        """
        check_file_id(file_id)
        return await asyncio.to_thread(self._put, file_id, filename, bytes(data), principal, run_id)

    def _get(self, file_id: str) -> StoredFile | None:
        record_path = self.root / f"{file_id}.json"
        path = self.root / file_id
        try:
            record = json.loads(record_path.read_text(encoding="utf-8"))
        except (FileNotFoundError, NotADirectoryError):
            return None
        if not path.is_file() or path.is_symlink():
            return None
        owner, run_id = record.get("principal"), record.get("run_id")
        return StoredFile(
            file_id=file_id,
            filename=str(record["filename"]),
            size=int(record["size"]),
            path=path,
            principal=owner if isinstance(owner, str) else None,
            run_id=run_id if isinstance(run_id, str) else None,
        )

    async def get(self, file_id: str) -> StoredFile | None:
        """The stored file ``file_id``, or ``None`` if there is none.

        Raises:
            FileIdError: ``file_id`` is not a plain name (nothing on disk is looked at).
        """
        check_file_id(file_id)
        return await asyncio.to_thread(self._get, file_id)


def files_api_fetch(client: Any) -> Fetch:
    """A ``Fetch`` over an ``AsyncAnthropic`` client's Files API: the file's metadata, then its content."""

    async def fetch(file_id: str) -> tuple[str, bytes]:
        meta = await client.beta.files.retrieve_metadata(file_id)
        content = await client.beta.files.download(file_id)
        return str(getattr(meta, "filename", "") or file_id), await content.read()

    return fetch


async def keep_files(
    backend: DirectoryFiles,
    files: list[dict[str, str]],
    fetch: Fetch,
    *,
    principal: str | None = None,
    run_id: str | None = None,
) -> None:
    """Fetch and store each of a run's ``meta_files`` items not stored yet; name it as stored ([SF1-a]).

    ``principal`` and ``run_id`` are the producing run's, recorded as each file's owner
    (spec server [FS2-a]).

    A stored item's ``filename`` is the real one and its ``storage_location`` the server's
    URL (``file_url``). A file that cannot be fetched or stored keeps the Files API id and
    location (spec §5.6-b) and the failure goes to the log: the run's end does not fail.
    """
    for item in files:
        file_id = item["file_id"]
        if not FILE_ID_PATTERN.fullmatch(file_id) or item.get("storage_location") == file_url(file_id):
            continue  # already kept, or an id that cannot be a stored name
        try:
            filename, data = await fetch(file_id)
            stored = await backend.put(file_id, filename, data, principal=principal, run_id=run_id)
        except Exception:
            log.exception("file %s could not be fetched and stored; it stays in the Files API", file_id)
            continue
        item["filename"] = stored.filename
        item["storage_location"] = file_url(file_id)
