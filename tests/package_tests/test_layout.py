"""Static checks of the package's layout, read with ``ast`` from the working tree (nothing is
imported): the modules of ``exsim`` import one another without a circle, the engine
(``exchange/``) depends on nothing above it, no module grows past 1,000 lines, and no file or
documented example still imports the old bare top-level packages.

The modules are the root ``__init__.py`` (``exsim``) and every ``.py`` file under the installed
folders; ``exchange/gateway/core.py`` is ``exsim.exchange.gateway.core``. An import counts
wherever it stands (module level, in a function, under ``if TYPE_CHECKING``), and so does
``importlib.import_module("...")`` / ``__import__("...")`` with a literal name.
"""

from __future__ import annotations

import ast
import functools
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "exsim"
FOLDERS = ("exchange", "store", "replay", "scenarios")
MAX_LINES = 1000


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join([PACKAGE, *parts])


def _package_files() -> dict[str, Path]:
    """module name -> source file, for every module that installs as part of ``exsim``."""
    files = {PACKAGE: ROOT / "__init__.py"}
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            if "__pycache__" not in path.parts:
                files[_module_name(path)] = path
    return files


MODULES = _package_files()


def _lazy_exports() -> dict[str, str]:
    """The root ``__init__``'s ``_EXPORTS`` table: public name -> module imported on first use
    (so ``from exsim import read`` imports ``exsim.store``)."""
    for node in ast.parse((ROOT / "__init__.py").read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == [
                "_EXPORTS"]:
            return ast.literal_eval(node.value)
    return {}


EXPORTS = _lazy_exports()


def _imports(source: str, module: str | None = None, is_package: bool = False
             ) -> list[tuple[str, tuple[str, ...], int]]:
    """Return (module imported, names taken from it, line) for every import in ``source``.
    Relative imports are resolved against ``module`` (None: skipped); ``is_package`` says the
    source is the package's ``__init__``."""
    tree = ast.parse(source)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, (), node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = tuple(alias.name for alias in node.names)
            if node.level == 0:
                found.append((node.module, names, node.lineno))
                if node.module == PACKAGE:
                    found += [(EXPORTS[n], (), node.lineno) for n in names if n in EXPORTS]
            elif module is not None:
                base = module.split(".")
                base = base[: len(base) - (node.level - (1 if is_package else 0))]
                target = ".".join(base + ([node.module] if node.module else []))
                found.append((target, names, node.lineno))
        elif (isinstance(node, ast.Call) and node.args
              and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)
              and ((isinstance(node.func, ast.Attribute) and node.func.attr == "import_module")
                   or (isinstance(node.func, ast.Name)
                       and node.func.id in ("__import__", "import_module")))):
            found.append((node.args[0].value, (), node.lineno))
    return found


def _edges(module: str, path: Path) -> dict[str, int]:
    """exsim modules that ``module`` imports -> the first line doing so. ``from pkg import sub``
    with ``sub`` a module counts as importing ``pkg.sub`` (not ``pkg``), so a submodule taking a
    sibling through its package's name is not mistaken for a circle."""
    out: dict[str, int] = {}
    for target, names, line in _read_imports(module, path):
        if target != PACKAGE and not target.startswith(PACKAGE + "."):
            continue
        subs = [f"{target}.{n}" for n in names if f"{target}.{n}" in MODULES]
        others = [n for n in names if f"{target}.{n}" not in MODULES]
        hits = subs + ([target] if others or not names else [])
        for hit in hits:
            while hit not in MODULES and "." in hit:   # `import exsim.x.Name`-style leftovers
                hit = hit.rsplit(".", 1)[0]
            if hit != module:
                out.setdefault(hit, line)
    return out


def _read_imports(module: str, path: Path):
    return _imports(path.read_text(encoding="utf-8"), module, path.name == "__init__.py")


@functools.cache
def _graph() -> dict[str, dict[str, int]]:
    return {m: _edges(m, p) for m, p in MODULES.items()}


def _find_cycle(graph: dict[str, dict[str, int]]) -> list[str] | None:
    """Return one cycle as a path [a, b, ..., a], or None (iterative depth-first search)."""
    state: dict[str, int] = {}   # 1 on the stack, 2 done
    for start in sorted(graph):
        if state.get(start):
            continue
        stack = [(start, iter(sorted(graph[start])))]
        path = [start]
        state[start] = 1
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                state[node] = 2
                stack.pop()
                path.pop()
            elif state.get(child) == 1:
                return path[path.index(child):] + [child]
            elif not state.get(child):
                state[child] = 1
                path.append(child)
                stack.append((child, iter(sorted(graph.get(child, {})))))
    return None


def _describe(cycle: list[str]) -> str:
    return "".join(f"\n  {a} imports {b} ({MODULES[a].relative_to(ROOT)}:{_graph()[a][b]})"
                   for a, b in zip(cycle, cycle[1:]))


def test_the_layout_checks_see_the_whole_package():
    assert {"exsim", "exsim.exchange", "exsim.store", "exsim.replay.cli",
            "exsim.scenarios.generators.hawkes"} <= set(MODULES)
    assert _graph()["exsim.scenarios.generators.hawkes"].keys() >= {
        "exsim.exchange.errors", "exsim.scenarios.generators.uniform"}
    assert EXPORTS["read"] == "exsim.store"
    assert ("exsim.store", (), 1) in _imports("from exsim import read\n")


def test_cycle_finder_reports_a_circle_with_its_path():
    graph = {"a": {"b": 1}, "b": {"c": 2}, "c": {"a": 3}, "d": {"a": 4}}
    assert _find_cycle(graph) == ["a", "b", "c", "a"]
    assert _find_cycle({"a": {"b": 1}, "b": {}}) is None


def test_no_import_circle_between_exsim_modules():
    cycle = _find_cycle(_graph())
    assert cycle is None, f"import circle {' -> '.join(cycle)}:{_describe(cycle)}"


def test_the_engine_imports_nothing_above_it():
    above = tuple(f"{PACKAGE}.{room}" for room in ("store", "replay", "scenarios"))
    bad = [f"{path.relative_to(ROOT)}:{line} imports {target}"
           for module, path in MODULES.items() if module.startswith(f"{PACKAGE}.exchange")
           for target, _, line in _read_imports(module, path)
           if target in above or target.startswith(tuple(a + "." for a in above))]
    assert not bad, "exchange/ must not depend on store, replay or scenarios:\n" + "\n".join(bad)


def test_no_module_is_longer_than_1000_lines():
    long = {str(p.relative_to(ROOT)): n for p in MODULES.values()
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert not long, f"modules over {MAX_LINES} lines: {long}"


OLD_NAMES = sorted(FOLDERS)


def _repo_py_files() -> list[Path]:
    """Every .py file git knows or would add (tracked, plus untracked ones not ignored)."""
    out = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z", "--", "*.py"],
                         cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return [ROOT / f for f in sorted(set(out.split("\0"))) if f and (ROOT / f).is_file()]


# a cheap look before parsing: only files with an import line naming an old package are parsed
_MAYBE_BARE = re.compile(r"^[ \t]*(?:from|import)\b[^\n]*(?<![\w.])(?:%s)\b"
                         r"|(?:import_module|__import__)\(\s*[\"'](?:%s)\b"
                         % (("|".join(OLD_NAMES),) * 2), flags=re.M)


def _bare_imports(source: str) -> list[str]:
    """Return the old bare package names that ``source`` imports as top-level modules."""
    if not _MAYBE_BARE.search(source):
        return []
    try:
        names = [target.split(".")[0] for target, _, _ in _imports(source)]
    except SyntaxError:   # a fragment in the docs: read its import lines instead
        names = [m.split(".")[0] for m in re.findall(r"^\s*from\s+([\w.]+)\s+import\b", source,
                                                     flags=re.M)]
        for listed in re.findall(r"^\s*import\s+([\w., ]+)", source, flags=re.M):
            names += [n.split()[0].split(".")[0] for n in listed.split(",") if n.strip()]
    return [n for n in names if n in OLD_NAMES]


def test_bare_import_finder_catches_every_form():
    assert _bare_imports("import os, store\nfrom exchange.kernels import x\n"
                         "def f():\n    import replay.cli\n"
                         "importlib.import_module('scenarios.loaders')\n") == [
        "store", "exchange", "replay", "scenarios"]
    assert _bare_imports("from exsim.store import read\nfrom . import scenarios\n") == []
    assert _bare_imports(">>> broken(\nfrom scenarios import load\nimport exsim, replay\n") == [
        "scenarios", "replay"]


def test_no_python_file_imports_the_old_bare_packages():
    files = _repo_py_files()
    assert ROOT / "tests" / "package_tests" / "test_layout.py" in files
    bad = {str(p.relative_to(ROOT)): found for p in files
           if (found := _bare_imports(p.read_text(encoding="utf-8")))}
    assert not bad, f"imports of the bare packages (use exsim.<name>): {bad}"


def _python_blocks(text: str) -> list[str]:
    blocks = re.findall(r"^```(?:python|py|pycon|python3)\s*\n(.*?)^```", text, flags=re.S | re.M)
    return [re.sub(r"^(\s*)(?:>>>|\.\.\.) ?", r"\1", b, flags=re.M) for b in blocks]


def test_no_documented_example_imports_the_old_bare_packages():
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    assert sum(len(_python_blocks(p.read_text(encoding="utf-8"))) for p in pages) > 0
    bad = {str(p.relative_to(ROOT)): found for p in pages
           if (found := [n for b in _python_blocks(p.read_text(encoding="utf-8"))
                         for n in _bare_imports(b)])}
    assert not bad, f"documented examples importing the bare packages: {bad}"
