"""Serving stored files: ``GET /files/{file_id}`` (spec ``spec/server.md`` §FS).

Owns: the route that answers a stored file with its real filename (``files_routes``).
Does not own: keeping files (``store/files.py``) or naming them in ``meta_files``
(``run/finish.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from envelope._extras import import_failed

try:
    from starlette.responses import FileResponse, Response
    from starlette.routing import Route
except ModuleNotFoundError as exc:  # spec cli [C10-c]: one line naming the extra, not the module
    raise import_failed(exc, __name__, "server") from None  # pragma: no cover  # in a subprocess (tests/install)

from ..store.files import FILES_PATH, DirectoryFiles, FileIdError
from .auth import owns
from .http import _Refused
from .owners import principal_of

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping

    from starlette.requests import Request

__all__ = ["files_routes"]


def files_routes(
    settings: Mapping[str, Any], route: Callable[[Callable[[Request], Awaitable[Response]]], Any]
) -> list[Route]:
    """``GET /files/{file_id}`` when the agent has a ``file_backend`` ([FS1-a]); none otherwise.

    ``route`` puts the handler behind the app's checks (the token, refusals as JSON). A
    file is served only to the principal whose run produced it, or an admin; another's is
    the same ``404 unknown_file`` as a missing one (spec server [FS2-a]).
    """
    backend = settings.get("file_backend")
    if not isinstance(backend, DirectoryFiles):
        return []

    async def serve(request: Request) -> Response:
        file_id = request.path_params["file_id"]
        try:
            stored = await backend.get(file_id)
        except FileIdError as exc:  # [FS1-b]: a path or an escape is refused before the disk is looked at
            raise _Refused(400, "invalid_file_id", str(exc)) from None
        if stored is None or not owns(principal_of(request), stored.principal):
            raise _Refused(404, "unknown_file", "no such file")  # spec server [FS2-a]: another's is as missing
        headers = {"X-Content-Type-Options": "nosniff", "Cache-Control": "private, no-store"}
        return FileResponse(stored.path, filename=stored.filename, headers=headers)

    return [Route(FILES_PATH + "/{file_id}", route(serve), methods=["GET"])]
