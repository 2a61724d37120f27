"""A name with a leading underscore is private to its module: no other module of the product, the checklist, the
testbed, the benches or the tools imports it (issue 39 item 4). A name another module needs is public where it is
defined; the finder names each file:line that breaks this, read with `ast`, and is proven on planted sources both ways.
"""

import ast
import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FOLDERS = ("golive", "suites", "testbed", "bench", "tools")
OURS = ("golive", "golive_testbed")  # the packages whose private names are checked


def _ours(module: str | None) -> bool:
    return module is not None and module.split(".")[0] in OURS


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _is_module(dotted: str) -> bool:
    """Whether `dotted` names a module or package (`from golive.facts import bash`), not a name inside one."""
    try:
        return importlib.util.find_spec(dotted) is not None
    except (ImportError, ValueError):
        return False


def private_imports(source: str, where: str) -> list[str]:
    """Each private name of golive (or the testbed) that `source` takes from another module, as "where:line name":
    `from golive.x import _name`, and `mod._name` where `mod` is one of our modules imported by name."""
    tree = ast.parse(source)
    modules: set[str] = set()  # local names bound to one of our modules
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and _ours(node.module):
            for alias in node.names:
                if _private(alias.name):
                    found.append(f"{where}:{node.lineno} {node.module}.{alias.name}")
                elif _is_module(f"{node.module}.{alias.name}"):
                    modules.add(alias.asname or alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if _ours(alias.name) and alias.asname:
                    modules.add(alias.asname)
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and _private(node.attr)
            and isinstance(node.value, ast.Name)
            and node.value.id in modules
        ):
            found.append(f"{where}:{node.lineno} {node.value.id}.{node.attr}")
    return found


def test_no_private_name_is_imported_across_modules() -> None:
    found = [
        hit
        for folder in FOLDERS
        for path in sorted((REPO / folder).rglob("*.py"))
        if ".venv" not in path.parts
        for hit in private_imports(path.read_text(encoding="utf-8"), str(path.relative_to(REPO)))
    ]
    assert not found, "private names imported across modules (make them public where they are defined):\n" + "\n".join(
        found
    )


def test_the_finder_names_a_planted_private_import_and_passes_public_ones() -> None:
    planted = (
        "from golive.endpoint.toolcalls import normalized, _hidden\n"
        "from golive.facts import bash\n"
        "import golive.facts.bash.walk as walk\n"
        "from os import _exit\n"  # not ours: not checked
        "x = bash._secret + walk._case_as_if('') + bash.parse_script('')\n"
    )
    assert private_imports(planted, "planted.py") == [
        "planted.py:1 golive.endpoint.toolcalls._hidden",
        "planted.py:5 bash._secret",
        "planted.py:5 walk._case_as_if",
    ]
    assert (
        private_imports("from golive.facts.bash import parse_script\nfrom golive import __version__\n", "ok.py") == []
    )
