"""Every Python example in docs/*.md runs as written (the blocks of one page run in order as one
script, in a fresh working directory), so the docs describe what the code does today.

The blocks are written to a real file first: an ``@njit(cache=True)`` example needs a source file
for numba's cache."""

from __future__ import annotations

import re
import runpy
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[2] / "docs"
PAGES = sorted(p.name for p in DOCS.glob("*.md") if "```python" in p.read_text())


def test_the_docs_have_python_examples():
    assert {"python-api.md", "replay.md", "backtesting.md", "scenarios.md"} <= set(PAGES)


@pytest.mark.parametrize("page", PAGES)
def test_python_examples_run(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    blocks = re.findall(r"```python\n(.*?)```", (DOCS / page).read_text(), flags=re.S)
    script = tmp_path / (page.replace("-", "_").replace(".md", "_examples.py"))
    script.write_text("\n".join(f"# --- python block {k} of docs/{page}\n{b}"
                                 for k, b in enumerate(blocks)))
    # why __main__: a reader runs the page as a script, so its `if __name__ == "__main__":`
    # blocks (the sweep example's) run too
    runpy.run_path(str(script), run_name="__main__")
