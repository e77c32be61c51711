"""The page's files, shipped in the package (``static/``), served by name from a fixed list."""

from __future__ import annotations

from functools import cache
from importlib import resources

#: every file the page is made of, with its Content-Type: nothing else is served
FILES = {
    "index.html": "text/html; charset=utf-8",
    "console.css": "text/css; charset=utf-8",
    "console.js": "text/javascript; charset=utf-8",
    "render.js": "text/javascript; charset=utf-8",
}


@cache
def asset(name: str) -> tuple[str, bytes] | None:
    """(Content-Type, bytes) of one of the page's files; None for any other name."""
    content_type = FILES.get(name)
    if content_type is None:
        return None
    return content_type, resources.files(__package__).joinpath("static", name).read_bytes()
