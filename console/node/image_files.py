"""Reading an image's contents offline: files through a never-started container, and one fixed
Python check run in a container without a network.

Both go through the one docker client (:mod:`seat_console.node.docker`) the caller passes in;
nothing here reaches a registry or the network:

* :func:`read_image_files`: ``POST /containers/create`` (never started, networking disabled),
  ``GET /containers/{id}/archive?path=…`` for each path, then the container is removed;
* :func:`run_offline`: ``docker run --rm --network none`` of an argv list (never a shell
  string; the argv comes from code, config values only as separate items), its output bounded,
  a timeout, the container removed whatever happens.
"""

from __future__ import annotations

import hashlib
import io
import tarfile
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

READER_LABEL = "org.seat-console.reader"
"""Label on the (never started) containers that read an image's files."""
MAX_OUTPUT_BYTES = 1 << 20
"""At most this much of an offline run's output is kept (1 MiB)."""


class ImageReadError(Exception):
    """The docker engine refused to create a reader container or to run an offline check, or
    a file is over the size bound; the message names the image, the call and the fix."""


@dataclass(frozen=True)
class ImageFile:
    """A file as found in an image: ``path``; ``kind`` (``file``, ``dir``, ``symlink``,
    ``missing``, ``other``); ``sha256`` and ``data`` (regular files only); ``mode``, ``uid``,
    ``gid``; ``link_target`` for a symlink."""

    path: str
    kind: str
    sha256: str | None = None
    data: bytes | None = field(default=None, repr=False)
    mode: int = 0o644
    uid: int = 0
    gid: int = 0
    link_target: str = ""


def read_image_files(client: Any, image_id: str, paths: Iterable[str], *,
                     max_bytes: int = 256 << 20,
                     label: str = READER_LABEL) -> dict[str, ImageFile]:
    """Read ``paths`` from ``image_id`` through a container that is created, never started, and
    removed (``GET /containers/{id}/archive``). Returns ``{path: ImageFile}`` (``missing`` for a
    path the image does not have). ``max_bytes``: the largest file read (the archive may be
    1 MiB larger for its headers). Raises :class:`ImageReadError` when the engine refuses (the
    message says which call) or a file is over ``max_bytes``."""
    from docker.errors import APIError, NotFound

    name = f"seat-console-read-{uuid.uuid4().hex[:10]}"
    try:
        c = client.containers.create(image_id, command=["/seat-console-never-started"],
                                     name=name, network_disabled=True, labels={label: "1"})
    except APIError as exc:
        raise ImageReadError(f"cannot create a (never started) container from {image_id} to "
                             f"read its files: {exc.explanation or exc}") from None
    out: dict[str, ImageFile] = {}
    try:
        for path in paths:
            try:
                stream, _stat = c.get_archive(path)
            except NotFound:
                out[path] = ImageFile(path, "missing")
                continue
            buf = io.BytesIO()
            total = 0
            for chunk in stream:
                total += len(chunk)
                if total > max_bytes + (1 << 20):
                    raise ImageReadError(f"{path} in {image_id} is over {max_bytes >> 20} MiB: "
                                         "is it the right path?")
                buf.write(chunk)
            buf.seek(0)
            with tarfile.open(fileobj=buf) as tar:
                members = tar.getmembers()
                m = members[0] if members else None
                if m is None:
                    out[path] = ImageFile(path, "missing")
                elif m.issym() or m.islnk():
                    out[path] = ImageFile(path, "symlink", link_target=m.linkname)
                elif m.isdir():
                    out[path] = ImageFile(path, "dir")
                elif not m.isfile():
                    out[path] = ImageFile(path, "other")
                else:
                    fh = tar.extractfile(m)
                    data = fh.read() if fh is not None else b""
                    out[path] = ImageFile(path, "file", hashlib.sha256(data).hexdigest(), data,
                                          m.mode & 0o7777, m.uid, m.gid)
    finally:
        try:
            c.remove(force=True)
        except APIError:  # pragma: no cover - reported by the next read; never started anyway
            pass
    return out


@dataclass(frozen=True)
class OfflineRun:
    """What :func:`run_offline` saw: ``exit_code`` (``None`` when it did not end in time),
    ``output`` (stdout and stderr, at most :data:`MAX_OUTPUT_BYTES`, UTF-8 with replacement),
    ``truncated``."""

    exit_code: int | None
    output: str
    truncated: bool = False


def run_offline(client: Any, image: str, argv: Sequence[str], *,
                volumes: Sequence[str] = (), timeout_s: float = 60.0,
                label: str = READER_LABEL) -> OfflineRun:
    """Run ``argv`` (a list: never a shell string) in a container of ``image`` with no network
    (``network_mode="none"``), no GPUs, the given read-only ``volumes`` (``"src:dst[:ro]"``, as
    the profile writes them), and wait at most ``timeout_s`` s; the container is removed
    whatever happens. Raises :class:`ImageReadError` when the engine refuses to create or start
    it (the message names the image and the call)."""
    from docker.errors import APIError
    from requests.exceptions import ConnectionError as RequestsConnectionError
    from requests.exceptions import ReadTimeout

    binds = [v if v.count(":") >= 2 else f"{v}:ro" for v in volumes]
    name = f"seat-console-check-{uuid.uuid4().hex[:10]}"
    try:
        c = client.containers.create(image, command=list(argv[1:]), entrypoint=[argv[0]],
                                     name=name, network_mode="none", volumes=binds,
                                     labels={label: "1"}, detach=True)
    except APIError as exc:
        raise ImageReadError(f"cannot create an offline check container from {image}: "
                             f"{exc.explanation or exc}") from None
    try:
        try:
            c.start()
        except APIError as exc:
            raise ImageReadError(f"cannot start the offline check in {image} ({argv[0]}): "
                                 f"{exc.explanation or exc}") from None
        try:
            code: int | None = int(c.wait(timeout=timeout_s).get("StatusCode", -1))
        except (ReadTimeout, RequestsConnectionError):
            code = None
        raw = c.logs(stdout=True, stderr=True) or b""
        truncated = len(raw) > MAX_OUTPUT_BYTES
        return OfflineRun(code, raw[:MAX_OUTPUT_BYTES].decode("utf-8", "replace"), truncated)
    finally:
        try:
            c.remove(force=True)
        except APIError:  # pragma: no cover - best effort; labelled for a by-hand cleanup
            pass


__all__ = ["ImageFile", "ImageReadError", "MAX_OUTPUT_BYTES", "OfflineRun", "READER_LABEL",
           "read_image_files", "run_offline"]
