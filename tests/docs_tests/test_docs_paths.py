"""Every repository path a page names exists (issue 40, item 6): a reader who runs
``pytest tests/test_scenarios_*.py`` or opens ``tests/test_loaders_dbn.py`` from the docs must find
it. Paths are the ``tests/``, ``benchmarks/``, ``docs/`` and package-folder names in README.md
and docs/*.md (globs must match at least one file)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PAGES = ["README.md"] + sorted(f"docs/{p.name}" for p in (REPO / "docs").glob("*.md"))
PATH = re.compile(r"(?<![\w/.-])((?:tests|benchmarks|docs|scenarios|replay|store|exchange)"
                  r"/[\w*./-]*\.(?:py|md|json|toml))")


def _named(page: str) -> list[tuple[int, str]]:
    text = (REPO / page).read_text()
    text = re.sub(r"<!-- ([\w-]+):begin -->.*?<!-- \1:end -->",
                  lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    return [(no, m) for no, line in enumerate(text.splitlines(), 1) for m in PATH.findall(line)]


@pytest.mark.parametrize("page", PAGES)
def test_every_path_a_page_names_exists(page):
    missing = [f"{page}:{no}: {p}" for no, p in _named(page)
               if not (list(REPO.glob(p)) if "*" in p else (REPO / p).exists())
               and "/local/" not in p]   # why: benchmarks/results/local/ is each machine's own
    assert not missing, "\n".join(missing)
