"""The docs that drift are generated or checked: MESSAGES.md and INTERNALS.md are the code's
(`make docs`), and every repository path the reader's docs name exists (issue 22 item 4)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from protocol import messages as M
from protocol.docgen import DOCS
from protocol.docgen import messages as docgen_messages

ROOT = Path(__file__).resolve().parent.parent
# Docs that describe the tree as it is now (CHANGELOG and DECISIONS are history: they keep the
# paths of their day).
CURRENT = ("README.md", "docs/ARCHITECTURE.md", "docs/MCP.md", "docs/PERFORMANCE.md")
MANUALS = ("docs/JMP.md", "docs/JEV-HARNESS.md", "docs/EDITORS.md", "docs/RESILIENCE.md")
TOP = ("kernel", "workers", "protocol", "host", "cli", "acp_server", "jev_harness", "jmp_lab")
TOP += ("tests",)
TOP += ("bench", "docs", "examples", "apixly_jev_harness")


@pytest.mark.parametrize("name", ["MESSAGES.md", "INTERNALS.md", "jmp-json.schema.json"])
def test_generated_docs_match_the_code(name: str) -> None:
    assert (ROOT / "docs" / name).read_text() == DOCS[name](), "run `make docs`"


def test_a_message_without_its_place_in_a_conversation_is_refused(monkeypatch) -> None:
    answers = dict(docgen_messages.ANSWERS)
    del answers[M.Validate]
    monkeypatch.setattr(docgen_messages, "ANSWERS", answers)
    with pytest.raises(ValueError, match="Validate"):
        docgen_messages.generate()


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to dashes."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def test_every_decisions_section_is_in_the_index_and_every_index_link_lands() -> None:
    text = (ROOT / "docs" / "DECISIONS.md").read_text()
    index, _, body = text.partition("\n## ")[2].partition("\n## ")
    assert index.startswith("Index by topic"), "DECISIONS.md opens with its index"
    sections = {slug(h) for h in re.findall(r"^## (.+)$", "## " + body, re.M)}
    linked = set(re.findall(r"\]\(#([^)]+)\)", index))
    assert not sections - linked, f"sections missing from the index: {sorted(sections - linked)}"
    assert not linked - sections, f"index links to no section: {sorted(linked - sections)}"


def named_paths(text: str) -> set[str]:
    """Backquoted repository paths (`kernel/run/ledger.py`, `tests/test_docs.py::name`)."""
    found = set()
    for token in re.findall(r"`([^`\s]+)`", text):
        path = token.split("::")[0].rstrip(".,:;)")
        if "/" in path and path.split("/")[0] in TOP and not re.search(r"[<>*{}$\[?]", path):
            found.add(path)
    return found


def test_every_path_a_current_doc_names_exists() -> None:
    missing = {
        (doc, path)
        for doc in (*CURRENT, *MANUALS)
        for path in named_paths((ROOT / doc).read_text())
        if not (ROOT / path).exists()
    }
    assert not missing, f"docs name paths the tree does not have: {sorted(missing)}"


def test_every_relative_link_of_a_current_doc_lands() -> None:
    broken = []
    for doc in (*CURRENT, *MANUALS):
        base = (ROOT / doc).parent
        text = re.sub(r"`[^`]*`", "", (ROOT / doc).read_text())  # code spans are not links
        for target in re.findall(r"\]\(([^)#:\s]+)(?:#[^)]*)?\)", text):
            if not (base / target).exists():
                broken.append((doc, target))
    assert not broken, f"links to files that do not exist: {broken}"


PRODUCT = ("cli", "acp_server", "kernel", "workers", "protocol", "host", "jev_harness", "jmp_lab")
PRODUCT += ("apixly_jev_harness",)


def test_the_readme_map_names_every_folder_of_the_tree_and_no_other() -> None:
    text = (ROOT / "README.md").read_text()
    rows = {
        m[0]: m[1]
        for m in re.findall(r"^\| `([a-z_]+)/` \| (.*) \|$", text.split("## The map", 1)[1], re.M)
    }
    wrong = []
    for top in PRODUCT:
        subs = {p.parent.name for p in (ROOT / top).glob("*/__init__.py")}
        named = set(re.findall(r"`([a-z_]+)/`", rows.get(top, "")))
        wrong += [f"{top}/ (no row)"] * (top not in rows)
        wrong += [f"{top}/{s}/ (not named)" for s in sorted(subs - named)]
        wrong += [f"{top}/{s}/ (no such folder)" for s in sorted(named - subs)]
    assert not wrong, f"README's map and the tree differ: {wrong}"


def test_the_changelog_is_cut_into_releases_and_the_newest_is_the_version() -> None:
    """CHANGELOG keeps released versions, newest first, each dated; the newest is the version
    pyproject.toml gives, which `--version` reports in a checkout (kernel/config/install.py).
    "Unreleased" holds only what landed since (a short list, not the history)."""
    from kernel.config.install import version

    text = (ROOT / "docs" / "CHANGELOG.md").read_text()
    heads = re.findall(r"^## (.+)$", text, re.M)
    released = [re.fullmatch(r"(\d+\.\d+\.\d+) — (\d{4}-\d{2}-\d{2})", h) for h in heads]
    assert heads[0] == "Unreleased" and all(released[1:]), heads
    numbers = [tuple(int(n) for n in m.group(1).split(".")) for m in released[1:] if m]
    assert numbers == sorted(numbers, reverse=True) and len(set(numbers)) == len(numbers)
    newest = released[1]
    assert newest is not None and newest.group(1) == version(ROOT)
    unreleased = text.split("## Unreleased", 1)[1].split("\n## ", 1)[0]
    assert unreleased.count("\n- ") <= 40, "cut a release: Unreleased is the history again"


# A document named in the product's code: `docs/CONTRACT.md section 4`, `docs/HARNESS.md 3`.
CITATION = re.compile(r"(?<![\w/.-])([\w./-]+\.md)\b(?:\s+(?:section\s+)?(\d+)\b)?")


def test_every_document_the_product_code_cites_is_in_the_repository() -> None:
    """A citation names a file of the repository from its root, and a numbered section of it
    exists; protocol/docgen writes docs/, so the links of the text it generates are relative to
    docs/ (issue 33 item 7: the code cited a CONTRACT.md and a HARNESS.md the tree lacked)."""
    broken = []
    for source in [
        ROOT / "main.py",
        *(p for top in (*PRODUCT, "jmp_agent") for p in (ROOT / top).rglob("*.py")),
    ]:
        rel = source.relative_to(ROOT)
        generates = rel.parts[:2] == ("protocol", "docgen")
        for name, section in CITATION.findall(source.read_text()):
            if name.startswith("//"):
                continue  # a URL: a document elsewhere, named where it is
            doc = ROOT / name
            doc = ROOT / "docs" / name if generates and not doc.is_file() else doc
            if not doc.is_file():
                broken.append(f"{rel}: {name}")
            elif section and not re.search(rf"^#+ {section}\. ", doc.read_text(), re.M):
                broken.append(f"{rel}: {name} section {section}")
    assert not broken, f"product code cites documents the repository lacks: {broken}"
