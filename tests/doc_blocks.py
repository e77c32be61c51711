"""The fenced code blocks of README.md and docs/*.md, with the check each is marked for.

A block is marked by an HTML comment on the line just before its fence (invisible when rendered)::

    <!-- check: broker -->
    ```python
    ...

The kinds are listed in :data:`KINDS`; tests/test_docs.py runs or parses every block by its kind,
and refuses a block without a mark, so a new example in the docs cannot go unchecked.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

#: kind -> what the docs test does with a block of that kind
KINDS = {
    "run": "runs it as written (python, or bash in a scratch directory)",
    "broker": "runs it as written against a broker started for it (its addresses put in place of "
              "127.0.0.1:9092 and localhost:9093)",
    "pytest": "runs it as a test file with pytest, in a project with the ini block marked pytest-ini",
    "pytest-ini": "the ini file of the pytest blocks of the same document",
    "data": "parses it (yaml, json, ini); the text is read by another block or documented as a file",
    "file": "checks that the file named in its first line (a comment) has every other line of the block",
    "usage": "runs the program with --help and checks every flag it shows exists, every --config "
             "setting is known and valid, and every tests/ or bench/ path it names exists (for a recorded "
             "run of a long command, such as a benchmark)",
    "ci": "checks that it is the command .ci/run runs (CI runs it)",
    "setup": "runs it as written in a copy of the repository (a fresh venv), until the broker answers",
    "docker": "run as written by tests/test_docker.py (it needs a container engine)",
    "spark": "run as written by tests/test_docs.py with a SparkSession (it needs Java and PySpark)",
    "spark-example": "run as written by the Spark test that asks tests/doc_examples.py for it by the name "
                     "in its first line (# example: NAME), with its placeholders replaced",
    "output": "a diagram or a dump of bytes, not a command",
}

_FENCE = re.compile(r"^```(\w*)\s*$")
_MARK = re.compile(r"^<!--\s*check:\s*([\w-]+)\s*-->\s*$")


@dataclass(frozen=True)
class DocBlock:
    path: Path
    line: int  # of the opening fence, 1-based
    lang: str
    kind: str | None
    text: str

    @property
    def name(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def doc_blocks(paths: list[Path] | None = None) -> list[DocBlock]:
    blocks: list[DocBlock] = []
    for path in paths or DOCS:
        lines = path.read_text(encoding="utf-8").splitlines()
        index = 0
        while index < len(lines):
            fence = _FENCE.match(lines[index])
            if fence is None:
                index += 1
                continue
            end = next((j for j in range(index + 1, len(lines)) if lines[j].strip() == "```"), None)
            if end is None:
                raise ValueError(f"{path}:{index + 1}: a fence that is never closed")
            mark = _MARK.match(lines[index - 1]) if index > 0 else None
            blocks.append(DocBlock(path, index + 1, fence[1], mark[1] if mark else None,
                                   "\n".join(lines[index + 1:end]) + "\n"))
            index = end + 1
    return blocks


def the_block(path: Path, kind: str, contains: str) -> DocBlock:
    """The one block of ``kind`` in ``path`` whose text holds ``contains``."""
    found = [b for b in doc_blocks([path]) if b.kind == kind and contains in b.text]
    assert len(found) == 1, f"expected one {kind} block with {contains!r} in {path}, found {len(found)}"
    return found[0]
