"""The code's shape, kept by tests (issue 39 item 4): no function over ~80 lines without a reason written beside it."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# the product, the checklist, the testbed, the benches and the tools; tests/ are cases, long by nature
WALKED = ("golive", "suites", "testbed", "bench", "tools")
MAX_LINES = 80
REASON = "# Long on purpose:"


def _has_reason(lines: list[str], node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Whether the comment block directly above the def (above its decorators, where it has any) gives a reason."""
    first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
    above = first - 2  # 0-based index of the line above
    while above >= 0 and lines[above].strip().startswith("#"):
        if lines[above].strip().startswith(REASON):
            return True
        above -= 1
    return False


def long_functions(source: str, filename: str) -> list[str]:
    """`file:line:name (N lines)` for each function (nested ones too) over MAX_LINES from def to end, with no reason."""
    lines = source.splitlines()
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        length = (node.end_lineno or node.lineno) - node.lineno + 1
        if length > MAX_LINES and not _has_reason(lines, node):
            found.append(f"{filename}:{node.lineno}:{node.name} ({length} lines)")
    return found


def _sources() -> list[Path]:
    return sorted(
        path
        for folder in WALKED
        for path in (REPO / folder).rglob("*.py")
        if not any(part.startswith(".") or part == "__pycache__" for part in path.relative_to(REPO).parts)
    )


def _planted(body_lines: int, above: str = "", decorator: str = "") -> str:
    body = "".join(f"    x{i} = {i}\n" for i in range(body_lines))
    return f"import functools\n\n\n{above}{decorator}def planted():\n{body}"


def test_the_finder_finds_a_long_function_and_spares_one_with_a_reason() -> None:
    # the finder both ways, so the walk below cannot pass because it finds nothing
    assert long_functions(_planted(MAX_LINES), "x.py") == ["x.py:4:planted (81 lines)"]
    assert long_functions(_planted(MAX_LINES - 1), "x.py") == []
    assert long_functions(_planted(MAX_LINES, above="# Long on purpose: one table, read top to bottom\n"), "x.py") == []
    # a reason above the decorators counts; one that does not start the line, or sits apart, does not
    decorated = _planted(MAX_LINES, above="# Long on purpose: why\n", decorator="@functools.cache\n")
    assert long_functions(decorated, "x.py") == []
    assert long_functions(_planted(MAX_LINES, above="# long on purpose? maybe\n"), "x.py") == [
        "x.py:5:planted (81 lines)"
    ]
    apart = _planted(MAX_LINES, above="# Long on purpose: why\n\n")
    assert long_functions(apart, "x.py") == ["x.py:6:planted (81 lines)"]
    # a reason may open a comment of several lines
    several = _planted(MAX_LINES, above="# Long on purpose: one state machine,\n# as the tool's is\n")
    assert long_functions(several, "x.py") == []
    # a nested long function is found too
    nested = "def outer():\n" + "".join(f"    {line}\n" for line in _planted(MAX_LINES).splitlines()[3:]) + "    pass\n"
    assert long_functions(nested, "x.py") == ["x.py:1:outer (83 lines)", "x.py:2:planted (81 lines)"]


def test_no_function_over_80_lines_without_a_reason_beside_it() -> None:
    sources = _sources()
    assert len(sources) > 100, f"walked only {len(sources)} files under {WALKED}: the walk lost its way"
    found = [hit for path in sources for hit in long_functions(path.read_text(), str(path.relative_to(REPO)))]
    assert not found, (
        f"functions over {MAX_LINES} lines: split each into named pieces, or write the reason in a comment line "
        f"directly above its def starting `{REASON}`:\n" + "\n".join(found)
    )
