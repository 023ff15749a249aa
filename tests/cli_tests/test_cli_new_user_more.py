"""What a new user meets (issue 18, continued): tables that keep every digit left of the point,
bare sample names found in the shared data folder, errors that name the file or argument, and
abandoned temporary run directories cleaned on the next run of the same name."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from cli_fixtures import run, write_scenario

REPO = Path(__file__).resolve().parents[2]


# -- 7: tables keep every digit left of the point ---------------------------------------------

def test_table_numbers_are_not_rounded_to_six_significant_digits():
    from replay.cli.common import format_number

    assert format_number(-132674.5) == "-132,674.5"
    assert format_number(987425123.25) == "987,425,123.25"
    assert "e+" not in format_number(987425123.0)
    assert format_number(3) == "3" and format_number(1234567) == "1,234,567"
    assert format_number(0.5) == "0.5" and format_number(0.0) == "0"
    assert format_number(float("nan")) == "nan"
    assert format_number(1.5e-5) == "1.5e-05"
