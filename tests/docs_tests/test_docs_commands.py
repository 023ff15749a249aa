"""Every shell command in README.md and docs/*.md runs as written, so a new user can follow them.

What is a command (``commands(page)``):
- each line of a fenced block whose first word is exsim, python, python3, pip or sqlite3 (any
  info string but python/toml: Python blocks run in tests/docs_tests/test_docs_examples.py); a trailing
  backslash or an open quote continues the line, ``# ...`` is a comment, ``a && b`` runs a then b;
- in docs/cli.md (generated from each command's ``--help``), each line of an example section;
- an inline code span that starts with ``python `` (the benchmark invocations the prose names);
  a span with ``[--option ...]`` parts is a synopsis and runs without them, on its defaults.
Not commands: generated report sections (``<!-- NAME:begin -->`` ... ``<!-- NAME:end -->``: their
``Command:`` lines record how the figures were taken; the reports are checked elsewhere) and other
inline spans (``exsim sweep``, ``pip install 'exsim[dist]'`` name a command or a package).

A command that cannot run here is marked in its page, on the line before its block:
``<!-- not run by tests: REASON -->``; MARKED pins how many each page has.

How they run: a page's commands run in document order in one fresh directory (so ``runs/default``
made by an earlier command exists for the later ones) holding only what a reader downloads beside
exsim: links to the shared samples under their own names (commands naming a sample are skipped, with the reason, when ../shared/data is
absent). ``exsim`` runs in-process; other commands run as processes. Benchmark commands
(``benchmarks``) run from the checkout, as docs/benchmarks.md says, in smoke mode
(EXSIM_BENCH_SMOKE=1, benchmarks/_smoke.py: seconds, JSON to a temp dir) and must leave
benchmarks/results and the docs untouched; a command that writes a tracked file (REDIRECT) writes
it to the working directory instead and must reproduce the committed file. Each command must exit 0 and print something (or
write the file it names with --out/--csv/--plot); EXPECT adds checks on what it prints.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from cli_fixtures import run

REPO = Path(__file__).resolve().parents[2]
PAGES = ["README.md"] + sorted(f"docs/{p.name}" for p in (REPO / "docs").glob("*.md"))
WORDS = ("exsim", "python", "python3", "pip", "sqlite3")
MARKER = re.compile(r"<!-- not run by tests: (.+?) -->")
GENERATED = re.compile(r"<!-- ([\w-]+):begin -->.*?<!-- \1:end -->", re.S)

# pages' "not run by tests" markers: a change here is a deliberate, reviewed decision
MARKED = {"README.md": 2, "docs/benchmarks.md": 3, "docs/gateway-fix.md": 1, "docs/scenarios.md": 1}

# commands that write into the checkout: run with the output sent to the working directory, and
# checked against the committed file instead (a test must not rewrite tracked files)
REDIRECT = {"python -m exsim.replay.cli.docs": ("cli.md", "docs/cli.md")}

# (command regex, output regex): what a command must print beyond exiting 0
EXPECT = [                                          # the first matching pattern applies
    (r"^exsim \w+ --help", r"usage: exsim"),
    (r"^exsim demo", r"(?i)verif"),
    (r"^exsim simulate", r"fills|messages"),
    (r"^exsim verify", r"(?i)\bok\b|no violation|0 violations"),
    (r"^exsim rerun", r"(?i)identical|\bok\b|byte"),
    (r"^exsim book", r"bid|ask"),
    (r"^exsim ls", r"segments|runs"),
    (r"^exsim (backtest|sweep)", r"pnl"),
    (r"^exsim bench\b", r"msgs/s"),
    (r"benchmarks\.compare", r"\| exsim \| .*\| reference \|"),
    (r"benchmarks\.bench_engine", r"\| uniform1 \| reused \|"),
    (r"check_lobster", r"'unequal': 0"),
]

# shared samples, linked into the working directory under the names the docs use
SHARED = {
    "quantcup_score_feed.csv": "quantcup_score_feed/quantcup_score_feed.csv",
    "lobster_AMZN_2012-06-21_level1": "lobster_AMZN_2012-06-21_level1",
    "binance_spot_btcusdt_20240808_hftbacktest": "binance_spot_btcusdt_20240808_hftbacktest",
}
SHARED_HINTS = tuple(SHARED) + ("shared_file(",)


@dataclass
class Command:
    page: str
    line: int
    text: str                     # as written (continuations joined)
    marked: str | None = None     # the marker's reason

    @property
    def benchmark(self) -> bool:
        return self.text.startswith("python") and "benchmarks" in self.text


# ------------------------------------------------------------------------------------ extraction
def _blank_generated(text: str) -> str:
    """The page with generated report sections blanked (line numbers kept)."""
    return GENERATED.sub(lambda m: "\n" * m.group(0).count("\n"), text)


def _logical_lines(lines: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """Join backslash continuations and lines inside an open quote; drop blank and comment lines."""
    out, acc, start = [], "", 0
    for no, raw in lines:
        if not acc:
            start = no
        if raw.rstrip().endswith("\\"):
            acc += raw.rstrip()[:-1] + " "
            continue
        acc += raw
        try:
            shlex.split(acc, comments=True)
        except ValueError:           # an open quote: the command goes on
            acc += "\n"
            continue
        if acc.strip() and not acc.strip().startswith("#"):
            out.append((start, acc.strip()))
        acc = ""
    assert not acc, f"line {start}: unterminated command {acc!r}"
    return out


def _cli_examples(body: str, first: int) -> list[tuple[int, str]]:
    lines = body.split("\n")
    for k, line in enumerate(lines):
        if line in ("example:", "examples:"):
            return _logical_lines([(first + j, lines[j][2:]) for j in range(k + 1, len(lines))
                                   if lines[j].startswith("  ")])
    return []


def commands(page: str) -> list[Command]:
    """The shell commands of ``page`` (a path relative to the checkout), in document order."""
    text = _blank_generated((REPO / page).read_text())
    found = []
    for m in re.finditer(r"^```(\w*)\n(.*?)^```", text, flags=re.S | re.M):
        lang, body = m.group(1), m.group(2)
        first = text.count("\n", 0, m.start()) + 2          # line number of the block's first line
        if lang in ("python", "toml"):
            continue
        before = text[:m.start()].rstrip("\n").rsplit("\n", 1)[-1]
        marker = MARKER.search(before)
        if page == "docs/cli.md":
            lines = _cli_examples(body, first)
        else:
            words = body.split()
            if not words or words[0].lstrip("$") not in WORDS:
                continue
            lines = _logical_lines([(first + j, ln) for j, ln in enumerate(body.split("\n"))])
        found += [Command(page, no, t, marker.group(1) if marker else None) for no, t in lines]
    fences = [(m.start(), m.end()) for m in re.finditer(r"^```.*?^```", text, flags=re.S | re.M)]
    for m in re.finditer(r"(?<!`)`(python [^`]+)`(?!`)", text):
        if any(a <= m.start() < b for a, b in fences):
            continue
        cmd = re.sub(r"\s*\[[^\]]*\]", "", " ".join(m.group(1).split()))   # a synopsis: defaults
        line_text = text[text.rfind("\n", 0, m.start()) + 1: text.find("\n", m.end())]
        marker = MARKER.search(line_text)
        found.append(Command(page, text.count("\n", 0, m.start()) + 1, cmd,
                             marker.group(1) if marker else None))
    return sorted(found, key=lambda c: c.line)


def _all_benchmark_commands() -> dict[str, list[Command]]:
    """Benchmark commands of every page, keyed by the command without its comment (run once)."""
    by_text: dict[str, list[Command]] = {}
    for page in PAGES:
        for c in commands(page):
            if c.benchmark and not c.marked:
                by_text.setdefault(shlex.join(shlex.split(c.text, comments=True)), []).append(c)
    return by_text


BENCHMARKS = _all_benchmark_commands()


# ------------------------------------------------------------------------------------ running
def _parts(cmd: Command) -> list[list[str]]:
    """argv of each part of ``a && b``; the help's own ``exsim COMMAND --help`` runs for every command."""
    parts = [shlex.split(p, comments=True) for p in re.split(r"\s&&\s", cmd.text)]
    if parts == [["exsim", "COMMAND", "--help"]]:
        from exsim.replay.cli.app import COMMANDS

        return [["exsim", c, "--help"] for c in COMMANDS]
    return parts


def _check_output(cmd: Command, argv: list[str], out: str, cwd: Path) -> None:
    where = f"{cmd.page}:{cmd.line} `{cmd.text}`"
    names = [argv[k + 1] for k, a in enumerate(argv[:-1]) if a in ("--out", "--csv", "--plot")]
    assert out.strip() or any((cwd / n).exists() for n in names), f"{where} printed nothing"
    for n in names:
        assert (cwd / n).exists(), f"{where} did not write {n}"
    joined = " ".join(argv)
    expect = next((e for p, e in EXPECT if re.search(p, joined)), None)
    if expect and "--json" not in argv and "--csv" not in argv:
        assert re.search(expect, out), f"{where}: output lacks {expect!r}:\n{out[-2000:]}"


def _env(smoke_dir: Path) -> dict:
    env = dict(os.environ, EXSIM_BENCH_SMOKE="1", EXSIM_BENCH_SMOKE_DIR=str(smoke_dir))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return env


def _process(argv: list[str], cwd: Path, env: dict, where: str) -> str:
    exe = {"python": sys.executable, "python3": sys.executable}.get(argv[0], argv[0])
    exe = exe if os.path.isabs(exe) else shutil.which(exe)
    assert exe, f"{where}: {argv[0]} is not installed"
    p = subprocess.run([exe, *argv[1:]], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, f"{where} exited {p.returncode}:\n{p.stdout[-2000:]}\n{p.stderr[-3000:]}"
    return p.stdout


def _run(cmd: Command, cwd: Path, smoke_dir: Path) -> None:
    where = f"{cmd.page}:{cmd.line} `{cmd.text}`"
    for argv in _parts(cmd):
        assert argv and argv[0] in WORDS, f"{where}: unknown command {argv[:1]}"
        if argv[0] == "exsim" and argv[1:2] == ["sweep"] and "local" in argv:
            # a LocalCluster's worker processes start from a clean interpreter, as for a user
            out = _process([sys.executable, "-m", "exsim.replay.cli", *argv[1:]], cwd, _env(smoke_dir), where)
        elif argv[0] == "exsim":
            code, out, err = run(argv[1:])
            assert code == 0, f"{where} exited {code}:\n{out[-2000:]}\n{err[-3000:]}"
        elif " ".join(argv) in REDIRECT:
            name, committed = REDIRECT[" ".join(argv)]
            out = _process([*argv, str(cwd / name)], cwd, _env(smoke_dir), where)
            assert (cwd / name).read_text() == (REPO / committed).read_text(), \
                f"{where}: {committed} differs from what the command writes (regenerate it)"
        else:
            out = _process(argv, REPO if cmd.benchmark else cwd, _env(smoke_dir), where)
        _check_output(cmd, argv, out, cwd)


def _workdir(tmp_path: Path) -> tuple[Path, bool]:
    """The page's working directory with the inputs the docs assume; (dir, shared samples present)."""
    from exsim.scenarios.data import shared_data_dir

    # why nothing else: a reader starts from an empty directory (a page that needs a scenario
    # file writes one first: exsim new-scenario)
    base = shared_data_dir()
    for name, rel in SHARED.items():
        if base is not None and (base / rel).exists():
            (tmp_path / name).symlink_to(base / rel)
    return tmp_path, base is not None and all((base / r).exists() for r in SHARED.values())


REPORTS = {"bench_engine": "engine.json", "bench_store": "store.json", "bench_replay": "replay.json",
           "bench_backtest": "backtest.json", "bench_seal": "seal.json",
           "bench_auction": "auction.json", "bench_restore": "restore.json",
           "bench_gateway": "gateway.json", "bench_ingest": "ingest.json", "compare": "compare.json",
           "bench_compile": "compile.json"}


def _snapshot(text: str) -> dict:
    """Hashes of what the benchmark in ``text`` would write outside smoke mode: its report and the
    pages --write-docs rewrites (only those: other engineers may be editing the rest meanwhile)."""
    files = [REPO / "benchmarks" / "results" / j for s, j in REPORTS.items() if s in text]
    files += [REPO / "README.md", REPO / "docs" / "benchmarks.md"]
    return {str(f): hashlib.sha256(f.read_bytes()).hexdigest() for f in files if f.is_file()}


# ------------------------------------------------------------------------------------ tests
def test_commands_are_found_where_the_docs_have_them():
    found = {p: commands(p) for p in PAGES}
    assert any(c.text.startswith("exsim simulate --out data/run1") for c in found["README.md"])
    assert any(c.text == "python -m benchmarks.bench_engine" for c in found["docs/benchmarks.md"])
    assert any(c.text == "python benchmarks/bench_replay.py" for c in found["docs/replay.md"])  # synopsis
    cli = [c.text for c in found["docs/cli.md"]]
    assert "exsim rerun runs/default" in cli and not any(t.startswith("usage") for t in cli)
    # continuation lines join into one command
    assert any("--order-ns 50000 --plot momentum.png" in t for t in cli)
    # generated report sections are not instructions
    assert not any("/tmp/bench312" in c.text for p in PAGES for c in found[p])


def test_marked_commands_are_exactly_the_stated_ones():
    marked = {p: sum(1 for c in commands(p) if c.marked) for p in PAGES}
    assert {p: n for p, n in marked.items() if n} == MARKED
    blocks = {p: len(MARKER.findall(_blank_generated((REPO / p).read_text()))) for p in PAGES}
    assert {p: n for p, n in blocks.items() if n} == MARKED, "a marker that marks no command"


@pytest.mark.parametrize("page", [p for p in PAGES
                                  if any(not (c.benchmark or c.marked) for c in commands(p))])
def test_page_commands_run_in_order(page, tmp_path, monkeypatch):
    (tmp_path / "work").mkdir()
    cwd, have_shared = _workdir(tmp_path / "work")
    monkeypatch.chdir(cwd)
    skipped = []
    ran = 0
    for cmd in commands(page):
        if cmd.marked or cmd.benchmark:
            continue
        if not have_shared and any(h in cmd.text for h in SHARED_HINTS):
            skipped.append(f"{cmd.line}: {cmd.text[:60]}")
            continue
        _run(cmd, cwd, tmp_path / "smoke")
        ran += 1
    assert ran or skipped, f"{page}: no runnable command"
    if skipped:
        pytest.skip(f"{page}: {ran} commands ran; the shared samples (../shared/data) are absent "
                    "for: " + "; ".join(skipped))


@pytest.mark.parametrize("text", list(BENCHMARKS))
def test_benchmark_command_runs_in_smoke_mode(text, tmp_path):
    cmd = BENCHMARKS[text][0]
    # an unwired script would run for minutes and overwrite the committed results: refuse it
    scripts = [p for p in (REPO / "benchmarks").glob("*.py") if p.stem in text]
    assert scripts and all("_smoke" in p.read_text() for p in scripts), \
        f"`{text}`: its benchmark script does not honour EXSIM_BENCH_SMOKE (benchmarks/_smoke.py)"
    from exsim.scenarios.data import shared_data_dir

    if shared_data_dir() is None:   # every benchmark reads the QuantCup feed or the Binance sample
        pytest.skip("the shared samples (../shared/data) are absent")
    before = _snapshot(text)
    _run(cmd, tmp_path, tmp_path / "smoke")
    assert _snapshot(text) == before, f"`{text}` changed benchmarks/results or the docs in smoke mode"
    assert list((tmp_path / "smoke").glob("*.json")), f"`{text}` wrote no JSON report"


def test_generated_blocks_are_closed_and_headings_unique():
    # a report block whose end marker is lost swallows the text after it, so a stale copy of a
    # section can survive unseen (every command inside a block is skipped)
    for page in PAGES:
        text = (REPO / page).read_text()
        open_name = None
        for m in re.finditer(r"<!-- ([\w-]+):(begin|end) -->", text):
            name, edge = m.groups()
            if edge == "begin":
                assert open_name is None, f"{page}: {name}:begin inside {open_name}'s block"
                open_name = name
            else:
                assert open_name == name, f"{page}: {name}:end without its begin"
                open_name = None
        assert open_name is None, f"{page}: {open_name}:begin has no end marker"
        heads = re.findall(r"^#{1,3} .+$", text, re.M)
        dup = sorted({h for h in heads if heads.count(h) > 1})
        assert not dup, f"{page}: headings repeated: {dup}"
