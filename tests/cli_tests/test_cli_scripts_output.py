"""What scripts and readers get from small commands (issue 40, item 7): ``exsim account`` prints
the bare generated secret on stdout and its remark on stderr; ``-v`` logs the steps with their
timings; ``exsim bench`` says the machine's load average beside its figures."""

from __future__ import annotations

import re

from cli_fixtures import run, write_scenario
from exsim.exchange.gateway.accounts import Accounts, check_password


def test_account_prints_the_bare_secret_on_stdout(tmp_path):
    f = tmp_path / "accounts.toml"
    code, out, err = run(["account", f, "alice", "--trader", "1"])
    assert code == 0, err
    secret = out.strip()
    assert out == secret + "\n" and " " not in secret and len(secret) >= 16
    assert "alice" in err and "hash" in err and secret not in err
    (acct,) = [a for a in Accounts.load(f) if a.name == "alice"]
    assert check_password(acct.password, secret)


def test_verbose_logs_each_step_with_its_time(tmp_path):
    code, out, err = run(["simulate", write_scenario(tmp_path), "--out", tmp_path / "r", "-q",
                          "--fsync", "none", "-v"])
    assert code == 0, err
    steps = [line for line in err.splitlines() if line.startswith("exsim: ")]
    assert all(re.search(r"\[\+\d+\.\d{3} s\]$", line) for line in steps), steps
    assert any(re.match(r"exsim: open the flow: \d+\.\d{3} s", line) for line in steps), steps
    assert any(re.match(r"exsim: match, journal and seal into .*: \d+\.\d{3} s", line) for line in steps)
    assert steps[-1].startswith("exsim: simulate: exit 0")
    assert "exsim: " not in out


def test_bench_prints_the_load_average(tmp_path):
    code, out, err = run(["bench", "--messages", 2000, "--runs", 1, "-q"])
    assert code == 0, err
    assert re.search(r"load average (\d+\.\d\d ){3}over 1/5/15 min, \d+ CPUs", out), out
    # no column without values: the one row has a value under each of the 8 columns
    assert len(out.splitlines()[2].split()) == 8
