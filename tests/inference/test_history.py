"""History ablations rewrite only the history list of each prompt, for every setting."""

from __future__ import annotations

import json

import pytest

from inference.benchmarks.petoolbench import load_petoolbench
from inference.errors import ConfigError
from inference.benchmarks.petoolbench.history import ablate_table, split_history
from tests.conftest import FAMILYTOOL_SAMPLE

pytestmark = pytest.mark.shared_data


@pytest.fixture(scope="module")
def first_record(petoolbench_file):
    return load_petoolbench(petoolbench_file, ["p", "r", "c"], limit=1)


def _parts(table):
    return {row["setting"]: split_history(row["system"]) for row in table.iter_rows(named=True)}


@pytest.mark.parametrize("mode,k,drop", [("none", 5, False), ("last_k", 3, False), ("shuffled", 5, False),
                                         ("full", 5, True)])
def test_an_ablation_rewrites_only_the_history_list(first_record, mode, k, drop):
    before, after = _parts(first_record), _parts(ablate_table(first_record, mode, k, drop, 0, "petoolbench"))
    assert set(before) == {"p", "r", "c"}
    for setting, (head, items, tail) in before.items():
        new_head, new_items, new_tail = after[setting]
        assert (new_head, new_tail) == (head, tail), "the text around the history is untouched"
        assert tail.startswith("\n\nAvailable tools")
        if mode == "none":
            assert new_items == []
        elif mode == "last_k":
            assert new_items == items[-3:]
        elif mode == "shuffled":
            assert new_items != items and sorted(map(json.dumps, new_items)) == sorted(map(json.dumps, items))
        else:
            assert all("rating" not in item for item in new_items) and len(new_items) == len(items)
            assert setting != "r" or any("rating" in item for item in items)


def test_none_leaves_a_well_formed_prompt_and_full_leaves_it_as_written(first_record):
    empty = ablate_table(first_record, "none", 5, False, 0, "petoolbench")
    assert all("Interaction history is:\n[]\n\nAvailable tools" in s for s in empty["system"])
    assert all("Interaction history is:\n[]\n\n" in s for s in empty["native_system"])
    assert ablate_table(first_record, "full", 5, False, 0, "petoolbench").equals(first_record)


def test_shuffled_orders_are_one_per_record_and_repeatable(first_record):
    one = _parts(ablate_table(first_record, "shuffled", 5, False, 0, "petoolbench"))
    again = _parts(ablate_table(first_record, "shuffled", 5, False, 0, "petoolbench"))
    assert one == again
    other_seed = _parts(ablate_table(first_record, "shuffled", 5, False, 1, "petoolbench"))
    assert other_seed["p"][1] != one["p"][1]


def test_an_ablation_on_a_benchmark_without_history_is_refused():
    from inference.benchmarks.familytool import load_familytool

    with pytest.raises(ConfigError, match="Leave dataset.history=full"):
        ablate_table(load_familytool(FAMILYTOOL_SAMPLE, ["b"], 2), "none", 5, False, 0, "familytool")
