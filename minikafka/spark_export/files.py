"""Where segment files live: a local directory, or any file system pyarrow opens (S3 and friends).

The reader needs four things of a file system: list a directory (names, kinds and sizes), read a
byte range of a file, read a small file whole (indexes, checkpoints), and tell a missing path
from an unreadable one. :class:`LocalFiles` does them with ``os`` calls (``pread``, never mmap);
:class:`ArrowFiles` with a ``pyarrow.fs`` file system, where a byte range is one ranged GET, so a
task reading a slice of a segment in object storage fetches that slice, not the whole object.

The data directory is named by a path or URL:

* ``/var/lib/minikafka`` or ``file:///var/lib/minikafka`` — local files;
* ``s3://bucket/prefix`` — S3 or any S3-compatible store; connection options (Spark's
  ``fs.s3a.*`` names or pyarrow's ``S3FileSystem`` argument names, see :data:`S3_OPTIONS`);
* any other URL pyarrow understands (``gs://``, ``hdfs://``, ``abfs://``) through
  ``pyarrow.fs.FileSystem.from_uri``, with that file system's default credentials.

A :class:`Storage` holds only the URL and the options, so it pickles into every Spark task, and
each process opens its own file system on first use.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import unquote, urlparse

from minikafka.spark_export.errors import ExportOptionError


class StorageError(OSError):
    """The storage could not be reached or refused access (credentials, endpoint, permissions)."""


@dataclass(frozen=True, slots=True)
class Entry:
    name: str
    is_dir: bool
    size: int


class RangeFile(Protocol):
    def pread(self, size: int, position: int) -> bytes: ...

    def pread_into(self, buffer: memoryview, position: int) -> int:
        """Fill ``buffer`` from ``position`` (less at the end of the file); the bytes read."""
        ...

    def close(self) -> None: ...


class Files(Protocol):
    """What the reader asks of a file system; paths are the file system's own (no scheme)."""

    root: str

    def join(self, *parts: str) -> str: ...

    def kind(self, path: str) -> str:
        """``dir``, ``file`` or ``missing``."""
        ...

    def list_dir(self, path: str) -> list[Entry] | None:
        """The entries of a directory, None if it does not exist."""
        ...

    def open(self, path: str) -> RangeFile:
        """A file for range reads; raises FileNotFoundError if it does not exist."""
        ...

    def read_bytes(self, path: str) -> bytes | None:
        """A small file's bytes, None if it does not exist or cannot be read."""
        ...

    def describe(self, path: str) -> str:
        """``path`` as the user would name it (with the scheme) for messages."""
        ...


class _LocalFile:
    __slots__ = ("fd",)

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def pread(self, size: int, position: int) -> bytes:
        return os.pread(self.fd, size, position)

    def pread_into(self, buffer: memoryview, position: int) -> int:
        return os.preadv(self.fd, [buffer], position)

    def close(self) -> None:
        os.close(self.fd)


class LocalFiles:
    """Files on a local (or mounted shared) file system."""

    def __init__(self, root: str) -> None:
        self.root = root

    def join(self, *parts: str) -> str:
        return os.path.join(*parts)

    def kind(self, path: str) -> str:
        if os.path.isdir(path):
            return "dir"
        return "file" if os.path.exists(path) else "missing"

    def list_dir(self, path: str) -> list[Entry] | None:
        try:
            with os.scandir(path) as it:
                out = []
                for e in it:
                    try:
                        is_dir = e.is_dir()
                        size = 0 if is_dir else e.stat().st_size
                    except FileNotFoundError:  # deleted by retention while we listed
                        continue
                    out.append(Entry(e.name, is_dir, size))
                return out
        except (FileNotFoundError, NotADirectoryError):
            return None

    def open(self, path: str) -> RangeFile:
        return _LocalFile(os.open(path, os.O_RDONLY))

    def read_bytes(self, path: str) -> bytes | None:
        try:
            with open(path, "rb") as f:
                return f.read()
        except OSError:
            return None

    def describe(self, path: str) -> str:
        return path


#: Small reads (batch headers, markers, index probes) fetch this much at once, so a walk over the
#: headers of a segment in object storage costs one GET per block rather than one per batch.
READ_AHEAD = 64 << 10


class _ArrowFile:
    __slots__ = ("f", "_block", "_block_start")

    def __init__(self, f: Any) -> None:
        self.f = f
        self._block = b""
        self._block_start = 0

    def pread(self, size: int, position: int) -> bytes:
        if size >= READ_AHEAD:
            return self.f.read_at(size, position)
        offset = position - self._block_start
        if not (0 <= offset and offset + size <= len(self._block)):
            self._block = self.f.read_at(READ_AHEAD, position)  # shorter at the end of the file
            self._block_start, offset = position, 0
        return self._block[offset : offset + size]

    def pread_into(self, buffer: memoryview, position: int) -> int:
        data = self.pread(len(buffer), position)
        buffer[: len(data)] = data
        return len(data)

    def close(self) -> None:
        self.f.close()


class ArrowFiles:
    """Files on a ``pyarrow.fs`` file system; every error that is not "missing" becomes a
    :class:`StorageError` naming the URL and what to check."""

    def __init__(self, fs: Any, root: str, scheme: str, hint: str) -> None:
        self.fs = fs
        self.root = root
        self.scheme = scheme
        self.hint = hint

    def join(self, *parts: str) -> str:
        return posixpath.join(*parts)

    def _fail(self, path: str, exc: Exception) -> StorageError:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return StorageError(f"cannot read {self.describe(path)}: {first}.{self.hint}")

    def kind(self, path: str) -> str:
        import pyarrow.fs as pafs

        try:
            info = self.fs.get_file_info(path)
        except OSError as exc:
            raise self._fail(path, exc) from None
        if info.type == pafs.FileType.Directory:
            return "dir"
        return "file" if info.type == pafs.FileType.File else "missing"

    def list_dir(self, path: str) -> list[Entry] | None:
        import pyarrow.fs as pafs

        try:
            infos = self.fs.get_file_info(pafs.FileSelector(path, allow_not_found=False))
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise self._fail(path, exc) from None
        return [Entry(i.base_name, i.type == pafs.FileType.Directory, i.size or 0) for i in infos]

    def open(self, path: str) -> _ArrowFile:
        try:
            return _ArrowFile(self.fs.open_input_file(path))
        except FileNotFoundError:
            raise
        except OSError as exc:
            if "not found" in str(exc).lower() or "does not exist" in str(exc).lower():
                raise FileNotFoundError(path) from None
            raise self._fail(path, exc) from None

    def read_bytes(self, path: str) -> bytes | None:
        try:
            f = self.open(path)
        except FileNotFoundError:
            return None
        try:
            size = f.f.size()
            return f.pread(size, 0)
        finally:
            f.close()

    def describe(self, path: str) -> str:
        return f"{self.scheme}://{path}"


#: Connection options for ``s3://`` data dirs: option name (lower case) -> S3FileSystem argument.
S3_OPTIONS = {
    "fs.s3a.endpoint": "endpoint_override",
    "endpoint_override": "endpoint_override",
    "fs.s3a.access.key": "access_key",
    "access_key": "access_key",
    "fs.s3a.secret.key": "secret_key",
    "secret_key": "secret_key",
    "fs.s3a.session.token": "session_token",
    "session_token": "session_token",
    "fs.s3a.endpoint.region": "region",
    "region": "region",
    "fs.s3a.connection.ssl.enabled": "scheme",
    "scheme": "scheme",
    "fs.s3a.anonymous": "anonymous",
    "anonymous": "anonymous",
}
#: Bounds on how long an unreachable or refusing store can hold a query (seconds, attempts).
S3_CONNECT_TIMEOUT = 5.0
S3_REQUEST_TIMEOUT = 30.0
S3_MAX_ATTEMPTS = 3


@dataclass(frozen=True)
class Storage:
    """A data directory's location: a local path or a URL, plus file system options (picklable)."""

    url: str
    options: tuple[tuple[str, str], ...] = ()
    _files: list[Files] = field(default_factory=list, compare=False, repr=False)

    @classmethod
    def from_options(cls, path: str, options: Mapping[str, str]) -> Storage:
        picked = tuple(sorted((k, v) for k, v in options.items() if k in S3_OPTIONS))
        storage = cls(path, picked)
        storage._split()  # check the URL now, on the driver
        return storage

    def __getstate__(self) -> tuple[str, tuple[tuple[str, str], ...]]:
        return self.url, self.options

    def __setstate__(self, state: tuple[str, tuple[tuple[str, str], ...]]) -> None:
        object.__setattr__(self, "url", state[0])
        object.__setattr__(self, "options", state[1])
        object.__setattr__(self, "_files", [])

    def _split(self) -> tuple[str, str]:
        """(scheme, path) — scheme '' for a local path."""
        parsed = urlparse(self.url)
        if len(parsed.scheme) <= 1:  # no scheme (or a Windows drive letter)
            return "", self.url
        if parsed.scheme == "file":
            if parsed.netloc not in ("", "localhost"):
                raise ExportOptionError(f"file:// URLs name a local path, got host {parsed.netloc!r} in {self.url}")
            return "", unquote(parsed.path)
        if parsed.scheme in ("s3", "s3a"):
            if not parsed.netloc:
                raise ExportOptionError(f"an S3 data directory is s3://bucket/prefix, got {self.url}")
            return "s3", (parsed.netloc + parsed.path).rstrip("/")
        return parsed.scheme, self.url

    @property
    def is_local(self) -> bool:
        return self._split()[0] == ""

    def files(self) -> Files:
        """The file system, opened once per process."""
        if not self._files:
            self._files.append(self._open())
        return self._files[0]

    def _open(self) -> Files:
        scheme, path = self._split()
        if scheme == "":
            return LocalFiles(path)
        if scheme == "s3":
            return ArrowFiles(_s3(dict(self.options)), path, "s3",
                              " Check the endpoint (fs.s3a.endpoint), the credentials (fs.s3a.access.key, "
                              "fs.s3a.secret.key) and that the bucket exists.")
        import pyarrow.fs as pafs

        try:
            fs, root = pafs.FileSystem.from_uri(path)
        except (OSError, ValueError) as exc:
            raise StorageError(f"cannot open {self.url}: {exc}") from None
        return ArrowFiles(fs, root.rstrip("/"), scheme, "")


def _s3(options: dict[str, str]) -> Any:
    import pyarrow.fs as pafs

    kwargs: dict[str, Any] = {}
    for name, value in options.items():
        kwargs[S3_OPTIONS[name]] = value
    endpoint = kwargs.get("endpoint_override")
    if endpoint and "://" in endpoint:  # fs.s3a.endpoint may carry the scheme; pyarrow wants it apart
        scheme, _, rest = endpoint.partition("://")
        kwargs["endpoint_override"] = rest
        kwargs.setdefault("scheme", scheme)
    if "scheme" in kwargs and kwargs["scheme"].lower() in ("true", "false"):  # fs.s3a.connection.ssl.enabled
        kwargs["scheme"] = "https" if kwargs["scheme"].lower() == "true" else "http"
    if "anonymous" in kwargs:
        kwargs["anonymous"] = str(kwargs["anonymous"]).lower() == "true"
    if ("access_key" in kwargs) != ("secret_key" in kwargs):
        raise ExportOptionError("give both fs.s3a.access.key and fs.s3a.secret.key (or neither)")
    kwargs.setdefault("region", "us-east-1")
    return pafs.S3FileSystem(
        connect_timeout=S3_CONNECT_TIMEOUT,
        request_timeout=S3_REQUEST_TIMEOUT,
        retry_strategy=pafs.AwsStandardS3RetryStrategy(max_attempts=S3_MAX_ATTEMPTS),
        **kwargs,
    )
