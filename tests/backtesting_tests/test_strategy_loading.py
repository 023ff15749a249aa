"""load_strategy: --param values of the wrong type are named, not failed on deep inside."""

import pytest

from exsim.exchange.errors import UsageError
from exsim.replay.backtesting.loading import load_strategy

MM = "exsim.replay.backtesting.strategies:InventoryMarketMaker"


@pytest.mark.parametrize("param,word", [("size=abc", "int"), ("size=1.5", "int"),
                                        ("size=true", "int")])
def test_a_param_of_the_wrong_type_is_a_usage_error_naming_it(param, word):
    with pytest.raises(UsageError, match=rf"--param {param.split('=')[0]}=.*takes an {word}"):
        load_strategy(MM, [param])


def test_params_of_the_right_type_build_the_strategy():
    s = load_strategy(MM, ["size=7"])
    assert s.size == 7
