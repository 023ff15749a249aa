"""The docs' sweep example runs as a script (issue 40, item 2): saved verbatim from
docs/backtesting.md and run by a fresh ``python`` in an empty directory, as a reader would, it
finishes (by default in-process: no Dask worker re-runs the script). A script that asks for a
LocalCluster without the ``__main__`` guard is refused with a sentence naming the guard, before
any worker starts."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parents[2] / "docs"


def _sweep_example() -> str:
    blocks = re.findall(r"```python\n(.*?)```", (DOCS / "backtesting.md").read_text(), flags=re.S)
    found = [b for b in blocks if "from exsim import sweep" in b]
    assert len(found) == 1, "docs/backtesting.md should hold one sweep example"
    return found[0]


def test_the_sweep_example_shows_the_main_guard():
    assert 'if __name__ == "__main__":' in _sweep_example()


def test_the_docs_sweep_example_runs_as_a_script(tmp_path):
    script = tmp_path / "sweep_example.py"
    script.write_text(_sweep_example())
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "best of 6: size" in done.stdout
    assert "Nanny" not in done.stderr and "bootstrapping" not in done.stderr


def test_a_local_cluster_from_an_unguarded_script_is_refused_with_the_reason(tmp_path):
    script = tmp_path / "unguarded.py"
    script.write_text("from exsim import sweep\n"
                      "sweep('default', 'exsim.replay.backtesting.strategies:InventoryMarketMaker',"
                      " {'size': [1]}, symbol='JPM', scheduler='local')\n")
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode != 0
    assert 'if __name__ == "__main__":' in done.stderr and "importing your script again" in done.stderr
