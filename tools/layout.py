"""docs/layout.md written from the code: every package and module of the product, the checklist, the testbed, the
benches and the tools, each with the first sentence of its docstring (a shell script: its header comment).

The map ends with how the packages of golive depend on each other (`package_graph`): which package imports which,
with how many import lines, read with `ast` from every `import golive.…` and `from golive.… import …` (those inside a
function or under TYPE_CHECKING count too: they are dependencies all the same). PRODUCT_LAYERS is the order the
packages are meant to stack in, lowest first: an import from a lower layer up to a higher one is flagged "upward", and
packages that import each other round a circle are named.

`python tools/layout.py` writes it; tests/unit/test_docs_truth.py fails when the file differs from what this script
writes, so a module added, renamed or re-described without running it fails a test. The folders of the repository
that hold no Python are described here (FOLDERS); a top-level folder that is in neither fails the script.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LAYOUT = REPO / "docs" / "layout.md"
COMMAND = "python tools/layout.py"

# Top-level folders, in the order the map shows them. A Python package says what it is in its own docstring; the
# text here is what a folder holds that no docstring says.
FOLDERS = {
    "golive": "the product, the one thing an operator installs (a wheel with no extras)",
    "suites": "the checklist, one test per recipe rule, installed inside the wheel as `golive.suites`",
    "testbed": "golive-testbed: the reference station, station trees, the real station and the demo; imports golive, "
    "never imported by it",
    "tests": "golive's own tests; `tests/golive_run.py` is the one way a test runs golive",
    "fixtures": "targets for the self-tests and the demo: GB300 station trees (healthy and broken), recorded outputs "
    "with provenance, inventories, site profiles (docs/recorded-vs-real.md)",
    "bench": "performance measurements; their results and how to reproduce them: docs/performance.md",
    "tools": "scripts that record real outputs for the fixtures, and this map's generator",
    "scripts": "the environment (`setup.sh`) and the operator install proven (`wheel-check.sh`)",
    "docs": "the operator's and the contributor's documentation; this file",
    "reports": "where `golive run` and `golive demo` write their reports by default (ignored by git)",
    ".ci": "CI's script: `bash .ci/run` (docs/ci.md)",
}
# The packages whose modules the map lists, one section each: (folder, heading)
SECTIONS = (
    ("golive", "the product"),
    ("suites", "the checklist"),
    ("testbed/golive_testbed", "the testbed"),
    ("bench", "benchmarks"),
    ("tools", "tools"),
    ("scripts", "scripts"),
)
# The product's packages (and its top-level modules) as they stack, lowest first: each imports only from those before
# it. A package or top-level module of golive that is not here fails the script: say where it stands.
PRODUCT_LAYERS = (
    "golive",  # the package itself: its __version__
    "golive.core",
    "golive.facts",
    "golive.profile",
    "golive.checklist",
    "golive.endpoint",
    "golive.station",
    "golive.site",
    "golive.report",
    "golive.run",
    "golive.day2",
    "golive.cli",
    "golive.__main__",
)
_SENTENCE = re.compile(r"(.+?[.!?])(?=\s+[A-Z`(\"]|$)")


def first_sentence(text: str) -> str:
    """The first sentence of a docstring's first paragraph, on one line."""
    paragraph = " ".join(text.strip().split("\n\n")[0].split())
    found = _SENTENCE.match(paragraph)
    return found.group(1) if found else paragraph


def described(path: Path) -> str:
    """What a file says it is: a module's docstring, a shell script's header comment."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".py":
        return first_sentence(ast.get_docstring(ast.parse(text)) or "")
    header = []
    for line in [line for line in text.splitlines() if not line.startswith("#!")]:
        if not line.startswith("#"):
            break
        header.append(line.lstrip("# "))
    return first_sentence("\n".join(header))


def tracked(folder: str) -> list[Path]:
    """The files under `folder`, tracked or new and not ignored: never what a build left beside them."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "--", folder],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return sorted(REPO / name for name in listed)


def checks_in(path: Path) -> int:
    """How many checks a suite module defines (its `test_` functions)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return sum(isinstance(node, ast.FunctionDef) and node.name.startswith("test_") for node in tree.body)


def _line(path: Path, text: str, suffix: str = "") -> str:
    if not text:
        raise SystemExit(
            f"{path.relative_to(REPO)} has no docstring (or header comment): say what it is, then run {COMMAND}"
        )
    return f"- `{path.relative_to(REPO)}` — {text}{suffix}"


def data_folders(package: Path, files: list[Path]) -> list[str]:
    """The folders of data a package ships (profiles, batteries, templates): not modules, listed by their files."""
    lines = []
    for data in sorted({p.parent for p in files if p.parent.parent == package and p.suffix != ".py"}):
        if (data / "__init__.py").exists():
            continue
        names = sorted(p.name for p in files if p.parent == data)
        lines.append(f"- `{data.relative_to(REPO)}/` — data the package ships: {', '.join(names)}")
    return lines


def section(folder: str, heading: str) -> list[str]:
    everything = [p for p in tracked(folder) if "/." not in str(p.relative_to(REPO))]
    files = [p for p in everything if p.suffix in (".py", ".sh", ".ini")]
    packages = sorted({p.parent for p in files if p.name == "__init__.py"}, key=lambda p: str(p))
    lines = [f"## `{folder}/` — {heading}", ""]
    loose = [p for p in files if p.parent == REPO / folder and p.name != "__init__.py"]
    roots = [p for p in packages if p == REPO / folder]
    if roots:
        lines += [described(roots[0] / "__init__.py"), ""]
    lines += [_line(p, described(p)) for p in loose]
    for package in packages:
        if package == REPO / folder:
            continue
        modules = [p for p in files if p.parent == package and p.name != "__init__.py"]
        said = _line(package / "__init__.py", described(package / "__init__.py")).split(" — ", 1)[1]
        lines += ["", f"**`{package.relative_to(REPO)}/`** — {said}", ""]
        for module in modules:
            count = checks_in(module) if folder == "suites" else 0
            suffix = f" ({count} check{'s' * (count != 1)})" if count else ""
            lines.append(_line(module, described(module), suffix))
        lines += data_folders(package, everything)
    return [*lines, ""]


def module_name(path: Path) -> str:
    """`golive/facts/nccl.py` → `golive.facts.nccl`; a package's `__init__.py` is the package."""
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(path: Path, modules: set[str]) -> list[set[str]]:
    """The golive modules each import statement of a file names, one set per statement (a `from PACKAGE import name`
    names the module PACKAGE.name where that is a module, else PACKAGE)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names = {
                f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in modules else node.module for a in node.names
            }
        else:
            continue
        golive = {name for name in names if name.split(".")[0] == "golive"}
        if golive:
            found.append(golive)
    return found


def package_of(module: str) -> str:
    """The node a module belongs to in the package graph: `golive.facts.nccl` → `golive.facts`; a top-level module
    (`golive.cli`) is its own."""
    return ".".join(module.split(".")[:2])


def circles(edges: set[tuple[str, str]]) -> list[list[str]]:
    """The groups of nodes that reach each other along `edges` (strongly connected, more than one node), sorted."""
    nodes = sorted({n for edge in edges for n in edge})
    reach = {n: {b for a, b in edges if a == n} for n in nodes}
    changed = True
    while changed:
        changed = False
        for n in nodes:
            further = set().union(*(reach[m] for m in reach[n])) - reach[n]
            if further:
                reach[n] |= further
                changed = True
    groups = {tuple(sorted(m for m in nodes if m == n or (m in reach[n] and n in reach[m]))) for n in nodes}
    return sorted(list(group) for group in groups if len(group) > 1)


def imports_between() -> tuple[dict[tuple[str, str], int], set[tuple[str, str]]]:
    """Which package of golive imports which, with how many import statements, and which module imports which."""
    files = [p for p in tracked("golive") if p.suffix == ".py"]
    modules = {module_name(p) for p in files}
    unplaced = sorted({package_of(m) for m in modules} - set(PRODUCT_LAYERS))
    if unplaced:
        raise SystemExit(
            f"tools/layout.py: say where {', '.join(unplaced)} stands in PRODUCT_LAYERS, then run {COMMAND}"
        )
    lines_between: dict[tuple[str, str], int] = {}
    module_edges: set[tuple[str, str]] = set()
    for path in files:
        source = module_name(path)
        for names in imported(path, modules):
            module_edges |= {(source, name) for name in names if name in modules and name != source}
            for target in sorted({package_of(name) for name in names} - {package_of(source)}):
                edge = (package_of(source), target)
                lines_between[edge] = lines_between.get(edge, 0) + 1
    return lines_between, module_edges


def upward(edges: Iterable[tuple[str, str]]) -> set[tuple[str, str]]:
    """The imports that go up PRODUCT_LAYERS: a lower package importing a higher one."""
    rank = {name: i for i, name in enumerate(PRODUCT_LAYERS)}
    return {(a, b) for a, b in edges if rank[b] > rank[a]}


def package_graph() -> list[str]:
    """The section of the map that says which package of golive imports which (a mermaid graph and the same as a
    list), with upward imports and circles named."""
    lines_between, module_edges = imports_between()
    rank = {name: i for i, name in enumerate(PRODUCT_LAYERS)}
    up = upward(lines_between)
    package_circles = circles(set(lines_between))
    module_circles = circles(module_edges)
    short = {name: name.removeprefix("golive.").strip("_") if name != "golive" else "golive" for name in rank}
    order = sorted(lines_between, key=lambda edge: (-rank[edge[0]], rank[edge[1]]))
    lines = [
        "## How the packages of `golive/` depend on each other",
        "",
        "Read from the imports (`ast`; those inside a function or under TYPE_CHECKING count too): an arrow A → B says",
        "modules of A import from B, with the number of import statements. The layers, lowest first:",
        ", ".join(f"`{name}`" for name in PRODUCT_LAYERS) + "; an import up the layers is drawn dotted and listed",
        "as upward. Before issue 39's reorganisation: docs/module-graph-before.md.",
        "",
        "```mermaid",
        "graph TD",
        *[f"  {short[a]}[{a}]" for a in PRODUCT_LAYERS if any(a in edge for edge in lines_between)],
        *[f"  {short[a]} {'-.->' if (a, b) in up else '-->'}|{lines_between[a, b]}| {short[b]}" for a, b in order],
        "```",
        "",
        *[
            f"- `{a}` → `{b}`: {n} import{'s' * (n != 1)}{' — upward' if (a, b) in up else ''}"
            for (a, b) in order
            for n in [lines_between[a, b]]
        ],
        "",
        f"Upward imports: {', '.join(f'`{a}` → `{b}`' for a, b in order if (a, b) in up) or 'none'}. "
        f"Circles between packages: {'; '.join(' ⇄ '.join(group) for group in package_circles) or 'none'}. "
        f"Circles between modules: {'; '.join(' ⇄ '.join(group) for group in module_circles) or 'none'}.",
        "",
    ]
    return lines


def render() -> str:
    top = sorted({p.relative_to(REPO).parts[0] for p in tracked(".") if len(p.relative_to(REPO).parts) > 1})
    unknown = [name for name in top if name not in FOLDERS]
    if unknown:
        raise SystemExit(f"tools/layout.py: say what {', '.join(unknown)} holds in FOLDERS, then run {COMMAND}")
    lines = [
        "# What is where",
        "",
        f"Written by `{COMMAND}` from the code: each module's line is the first sentence of its docstring. Do not edit",
        "it by hand: tests/unit/test_docs_truth.py fails when it differs from what the script writes (a module added,",
        "renamed or re-described): run the command and commit the result.",
        "",
        "## The repository",
        "",
        *[f"- `{name}/` — {FOLDERS[name]}" for name in FOLDERS if name in top],
        "",
    ]
    for folder, heading in SECTIONS:
        lines += section(folder, heading)
        if folder == "golive":
            lines += package_graph()
    return "\n".join(lines).rstrip("\n") + "\n"


def main(argv: list[str]) -> int:
    if argv:
        print(f"usage: {COMMAND}", file=sys.stderr)
        return 4
    LAYOUT.write_text(render(), encoding="utf-8")
    print(f"wrote {LAYOUT.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
