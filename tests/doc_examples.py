"""The Spark examples of docs/spark.md that need more than a local session (a cluster, an S3
server, a stream), for the tests that run them (no tests here).

Each is a block marked ``spark-example`` whose first line is ``# example: NAME``. Tests replace the
placeholder paths, hosts and keys of the text with real ones and run the code as written.
"""

from __future__ import annotations

from tests.doc_blocks import ROOT, doc_blocks

DOC = ROOT / "docs" / "spark.md"


def example(name: str, replacements: dict[str, str] | None = None) -> str:
    """The code of example ``name``, with every placeholder in ``replacements`` substituted."""
    first_line = f"# example: {name}\n"
    found = [b.text for b in doc_blocks([DOC]) if b.kind == "spark-example" and b.text.startswith(first_line)]
    assert len(found) == 1, f"expected one spark-example block named {name!r} in {DOC}, found {len(found)}"
    code = found[0]
    for placeholder, value in (replacements or {}).items():
        assert placeholder in code, f"docs/spark.md example {name!r} no longer mentions {placeholder!r}"
        code = code.replace(placeholder, value)
    return code
