"""docs/layout.md written from the code: every package and module of the product, the checklist, the testbed, the
benches and the tools, each with the first sentence of its docstring (a shell script: its header comment).

`python tools/layout.py` writes it; tests/unit/test_docs_truth.py fails when the file differs from what this script
writes, so a module added, renamed or re-described without running it fails a test. The folders of the repository
that hold no Python are described here (FOLDERS); a top-level folder that is in neither fails the script.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
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
