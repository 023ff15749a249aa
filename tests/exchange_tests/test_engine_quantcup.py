"""The QuantCup 2011 scoring feed through the engine and the model: identical trades, 16,887 of them."""

from pathlib import Path

import pytest

from conftest import assert_same_books, assert_same_outputs, concat, make_book
from exsim.scenarios.loaders.quantcup import load_quantcup

FEED = Path("/work/shared/data/quantcup_score_feed/quantcup_score_feed.csv")
pytestmark = [pytest.mark.skipif(not FEED.exists(), reason="shared data not mounted")]
QC = [("QC", 1, 2**62)]


@pytest.fixture(scope="module")
def feed():
    return load_quantcup(FEED)


@pytest.fixture(scope="module")
def model_outputs(feed):
    model = make_book("model", symbols=QC)
    return model, model.process(feed)


def test_quantcup_feed_gives_16887_trades_identical_to_the_model(feed, model_outputs):
    result = make_book("engine", symbols=QC).process(feed)
    assert len(result.fills) == len(model_outputs[1].fills) == 16887
    assert_same_outputs(result, model_outputs[1])


def test_quantcup_feed_engine_and_model_agree_row_for_row_in_batches(feed, model_outputs):
    engine = make_book("engine", symbols=QC)
    results = [engine.process(feed[i:i + 1000]) for i in range(0, len(feed), 1000)]
    assert_same_outputs(concat(results), model_outputs[1])
    assert_same_books(engine, model_outputs[0], QC)
