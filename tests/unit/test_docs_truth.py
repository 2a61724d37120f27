"""The docs name what exists: every path they cite is in the repository, every `file.py::test` is a test of that file,
every "`module.py` `name`" is a name in that module, and the counts they quote are the code's."""

import importlib.util
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
_ROOTS = "golive|suites|tests|testbed|bench|scripts|fixtures|tools|docs"
PATH = re.compile(rf"`((?:{_ROOTS})/[\w./*-]+?)`")
MODULE = re.compile(r"((?:golive|suites|tests|testbed|bench)/[\w/]+\.py)(?=::)")  # the file a later `…::name` is in
TEST_REF = re.compile(r"(?:(?:tests|suites)/[\w/]+\.py)?(?:…|\.\.\.)?::(\w+)")
NAMED = re.compile(r"`((?:golive|suites|tests|testbed|bench)/[\w/]+\.py)`\s+`([A-Za-z_][\w.]*)`")


def _cells(doc: Path) -> list[str]:
    """A table row's cells, or a paragraph's lines: the unit a `…::name` refers back within."""
    return [cell for line in doc.read_text().splitlines() for cell in line.split(" | ")]


@pytest.mark.parametrize("doc", DOCS, ids=[d.name for d in DOCS])
def test_every_cited_path_exists(doc):
    missing = sorted(
        {m.group(1).rstrip(".") for m in PATH.finditer(doc.read_text()) if not list(REPO.glob(m.group(1).rstrip(".")))}
    )
    assert not missing, f"{doc.name} cites paths that do not exist: {missing}"


@pytest.mark.parametrize("doc", DOCS, ids=[d.name for d in DOCS])
def test_every_cited_test_and_name_exists(doc):
    wrong = []
    for cell in _cells(doc):
        last: str | None = None
        for m in re.finditer(rf"{MODULE.pattern}|{TEST_REF.pattern}", cell):
            if m.group(1):
                last = m.group(1)
                continue
            name = m.group(2)
            if last and (REPO / last).is_file() and not re.search(rf"def {name}\b", (REPO / last).read_text()):
                wrong.append(f"{last}::{name}")
        for m in NAMED.finditer(cell):
            module, name = m.group(1), m.group(2).split(".")[0]
            if (REPO / module).is_file() and not re.search(rf"\b{re.escape(name)}\b", (REPO / module).read_text()):
                wrong.append(f"{module} `{name}`")
    assert not wrong, f"{doc.name} names what does not exist: {wrong}"


def _properties(path: Path) -> int:
    """Hypothesis properties in a test module, one per parametrized case (as pytest collects them)."""
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    count = 0
    for value in vars(module).values():
        if callable(value) and getattr(value, "is_hypothesis_test", False):
            cases = 1
            for mark in getattr(value, "pytestmark", []):
                if mark.name == "parametrize":
                    cases *= len(mark.args[1])
            count += cases
    return count


def test_the_fuzz_count_quoted_is_the_code_s():
    """docs/guarantees.md says how many properties tests/unit/test_fuzz.py holds: that number is collected."""
    quoted = re.search(r"`tests/unit/test_fuzz\.py` \((\d+) properties", (REPO / "docs/guarantees.md").read_text())
    assert quoted, "docs/guarantees.md no longer quotes the fuzz properties' count"
    assert int(quoted.group(1)) == _properties(REPO / "tests/unit/test_fuzz.py")


def _layout_script():
    spec = importlib.util.spec_from_file_location("layout", REPO / "tools/layout.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_layout_is_what_the_code_says():
    """docs/layout.md is written by tools/layout.py from the code (each module's docstring): a module added, renamed,
    removed or re-described without running it fails here, with the command that fixes it."""
    layout = _layout_script()
    written = (REPO / "docs/layout.md").read_text()
    assert written == layout.render(), (
        f"docs/layout.md is not what the code says (a module added, renamed or re-described): run "
        f"`.venv/bin/{layout.COMMAND}` and commit docs/layout.md"
    )


def test_the_packages_stack_in_their_layers():
    """No package of golive imports one above it in tools/layout.py's PRODUCT_LAYERS (the two it had before issue 39,
    profile → checklist and report → run, are gone: docs/module-graph-before.md) and no modules import each other
    round a circle."""
    layout = _layout_script()
    between, modules = layout.imports_between()
    assert len(between) > 30, "the graph lost its edges: the script reads the wrong files"
    assert not layout.upward(between), (
        f"a package imports one above it: {sorted(layout.upward(between))} "
        f"(docs/layout.md, 'How the packages of golive/ depend on each other'; tools/layout.py PRODUCT_LAYERS)"
    )
    assert layout.circles(modules) == [], f"modules import each other round a circle: {layout.circles(modules)}"
    assert layout.circles(between) == [], f"packages import each other round a circle: {layout.circles(between)}"


def test_the_layout_has_a_line_for_every_module():
    """Every module of the product, the checklist and the testbed has its own line in docs/layout.md."""
    text = (REPO / "docs/layout.md").read_text()
    mapped = set(re.findall(r"^- `((?:golive|suites|testbed)/[\w/]+\.py)` — ", text, flags=re.MULTILINE))
    modules = {
        str(path.relative_to(REPO))
        for root in ("golive", "suites", "testbed/golive_testbed")
        for path in (REPO / root).rglob("*.py")
        if path.name != "__init__.py"
    }
    assert len(modules) > 100, "the test looks in the wrong place"
    assert not modules - mapped, f"docs/layout.md has no line for {sorted(modules - mapped)}"


def test_the_readme_lists_every_reference_variant():
    """README's list of broken reference variants is the testbed's (golive_testbed.reference VARIANTS), every one."""
    from golive_testbed.reference import VARIANTS

    text = " ".join((REPO / "README.md").read_text().split("Broken\nvariants are", 1)[1].split("\n\n", 1)[0].split())
    listed = re.findall(r"`([a-z0-9-]+)`", text.split("golive's own tests prove", 1)[0])
    assert sorted(listed) == sorted(set(VARIANTS) - {"healthy"}), (
        f"README's variants differ from golive_testbed.reference VARIANTS: missing "
        f"{sorted(set(VARIANTS) - {'healthy'} - set(listed))}, unknown {sorted(set(listed) - set(VARIANTS))}"
    )
