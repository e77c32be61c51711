"""Every ``docs/<file>.md#anchor`` the code and the docs cite leads somewhere.

Comments, docstrings and error texts point readers at a rule by its anchor (``docs/semantics.md#recovery``);
the docs link each other the same way (``[...](semantics.md#txn-cleaning)``, ``[...](#streaming)``). An
anchor is an ``<a id="...">`` tag or a heading, named by the slug GitHub gives it. A renamed heading or a
dropped tag leaves every citation of it dangling, and nothing else notices.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.doc_blocks import ROOT

DOCS = ROOT / "docs"
#: where citations are looked for: the package, its tests and benchmarks, the docs and the README
CITING = [*ROOT.glob("minikafka/**/*.py"), *ROOT.glob("pyspark_minikafka/**/*.py"), *ROOT.glob("tests/**/*.py"),
          *ROOT.glob("bench/**/*.py"), *DOCS.glob("*.md"), ROOT / "README.md"]
CITATION = re.compile(r"\bdocs/([A-Za-z0-9_-]+\.md)#([A-Za-z0-9_-]+)")
#: a markdown link inside docs/: to another doc's anchor (relative to docs/) or to one of its own
DOC_LINK = re.compile(r"\]\((?:([A-Za-z0-9_-]+\.md))?#([A-Za-z0-9_-]+)\)")
ANCHOR_TAG = re.compile(r"""<a\s+(?:id|name)=["']([^"']+)["']""")
FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$")


def github_slug(heading: str) -> str:
    """The anchor GitHub makes of a heading: the rendered text lower-cased, punctuation dropped
    (hyphens and underscores kept), spaces turned to hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link renders as its text
    text = re.sub(r"<[^>]+>", "", text).lower()  # inline HTML renders as nothing
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(markdown: str) -> set[str]:
    """The anchors a markdown file defines: its ``<a id>`` tags and its headings' slugs (outside code
    fences; a repeated heading gets GitHub's ``-1``, ``-2`` suffixes)."""
    found = set(ANCHOR_TAG.findall(markdown))
    seen: dict[str, int] = {}
    in_fence = False
    for line in markdown.splitlines():
        if FENCE.match(line):
            in_fence = not in_fence
            continue
        heading = None if in_fence else HEADING.match(line)
        if heading:
            slug = github_slug(heading.group(1))
            found.add(f"{slug}-{seen[slug]}" if slug in seen else slug)
            seen[slug] = seen.get(slug, 0) + 1
    return found


def citations(path: Path, text: str) -> list[tuple[str, str]]:
    """(doc file name, anchor) for each citation in one file; links inside docs/ are relative to it."""
    cited = CITATION.findall(text)
    if path.parent.name == "docs":
        cited += [(target or path.name, anchor) for target, anchor in DOC_LINK.findall(text)]
    return cited


def dangling(files: list[Path], root: Path) -> list[str]:
    """``file:line: docs/<doc>#anchor`` for each citation whose doc or anchor does not exist."""
    docs = root / "docs"
    defined: dict[str, set[str]] = {}
    problems = []
    for path in files:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for doc, anchor in citations(path, line):
                if doc not in defined:
                    target = docs / doc
                    defined[doc] = anchors(target.read_text(encoding="utf-8")) if target.exists() else set()
                if anchor not in defined[doc]:
                    problems.append(f"{path.relative_to(root)}:{number}: docs/{doc}#{anchor}")
    return problems


def test_every_cited_doc_anchor_exists() -> None:
    assert dangling(CITING, ROOT) == []


def test_the_check_finds_a_citation_of_a_missing_anchor(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "rules.md").write_text('# Rules\n\n<a id="append-rules"></a>\n## Offsets (`log.py`)\n\n'
                                   "```bash\n# not a heading\n```\n## Offsets (`log.py`)\n")
    code = tmp_path / "sample.py"
    names = ["append-rules", "rules", "offsets-logpy", "offsets-logpy-1", "no-such-rule", "not-a-heading"]
    lines = [*(f"docs/rules.md#{name}" for name in names), "docs/missing.md" + "#rules"]
    code.write_text("\n".join(f"# see {line}" for line in lines) + "\n")
    assert dangling([code], tmp_path) == [f"sample.py:{n}: {lines[n - 1]}" for n in (5, 6, 7)]


@pytest.mark.parametrize(("heading", "slug"), [
    ("Spark exporter vs a consumer (`bench/export.py`)", "spark-exporter-vs-a-consumer-benchexportpy"),
    ("Local reads against the 5x goal", "local-reads-against-the-5x-goal"),
    ("The [partition log](architecture.md)'s modules", "the-partition-logs-modules"),
    ("read_committed and the LSO", "read_committed-and-the-lso"),
])
def test_github_slug(heading: str, slug: str) -> None:
    assert github_slug(heading) == slug
