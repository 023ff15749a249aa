"""Issue 18 item 6: a segment file deleted under a data directory is named by every command that
reads it; verify and rerun call it a finding about the data (exit 1), and ``exsim ls`` marks it."""

from __future__ import annotations

import shutil

import pytest

from cli_fixtures import run, write_scenario


@pytest.fixture(scope="module")
def damaged(tmp_path_factory):
    base = tmp_path_factory.mktemp("missing")
    code, _, err = run(["simulate", write_scenario(base), "--out", base / "run", "--batch", 500,
                        "--fsync", "none", "-q"])
    assert code == 0, err
    gone = sorted((base / "run" / "segments" / "fills").rglob("*.seg"))[0]
    gone.unlink()
    return base / "run", gone


@pytest.mark.parametrize("argv, status", [
    (["verify"], 1), (["rerun"], 1), (["stats", "{d}", "AAA"], 2),
    (["export", "{d}", "fills", "--format", "csv", "--out", "{t}/f.csv"], 2)])
def test_a_deleted_segment_is_named(damaged, tmp_path, argv, status):
    data_dir, gone = damaged
    args = [a.format(d=data_dir, t=tmp_path) for a in argv]
    if len(args) == 1:
        args.append(str(data_dir))
    code, out, err = run(args)
    text = out + err
    assert code == status, text
    assert str(gone) in text and "missing" in text
    assert "Traceback" not in text and "vanishing" not in text


def test_ls_marks_the_missing_file(damaged):
    data_dir, gone = damaged
    code, out, err = run(["ls", data_dir, "--files"])
    assert code == 0, err
    row = next(line for line in out.splitlines() if gone.name in line)
    assert row.rstrip().endswith("MISSING")
    assert sum(line.rstrip().endswith(" ok") for line in out.splitlines()) == 7
    assert gone.name in err and "missing" in err


def test_ls_of_an_intact_directory_marks_nothing(damaged, tmp_path):
    data_dir, _ = damaged
    code, _, err = run(["simulate", write_scenario(tmp_path), "--out", tmp_path / "ok",
                        "--batch", 500, "--fsync", "none", "-q"])
    assert code == 0, err
    code, out, err = run(["ls", tmp_path / "ok", "--files"])
    assert code == 0 and "MISSING" not in out and "missing" not in err


def test_the_library_raises_a_corruption_error_carrying_the_path(damaged):
    from exsim.exchange.errors import CorruptionError
    from exsim.store.query import Reader, read

    data_dir, gone = damaged
    with pytest.raises(CorruptionError, match="is missing") as info:
        read(str(data_dir), "fills")
    assert info.value.path == str(gone)
    with Reader(str(data_dir)) as reader, pytest.raises(CorruptionError, match=gone.name):
        reader.last_row("fills", symbol="AAA")
