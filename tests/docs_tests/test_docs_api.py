"""docs/python-api.md stays true: every public name is on it, and its engine example runs."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "python-api.md"


@pytest.mark.parametrize("package", ["exsim.exchange", "exsim.store", "exsim.replay", "exsim.scenarios"])
def test_every_public_name_is_documented(package):
    text = DOC.read_text()
    missing = [n for n in importlib.import_module(package).__all__ if f"`{n}`" not in text
               and not re.search(rf"`{n}\(", text)]
    assert not missing, f"docs/python-api.md does not mention {package}.{missing}"


def test_engine_example_runs_as_written():
    example = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)[0]
    exec(example, {})
