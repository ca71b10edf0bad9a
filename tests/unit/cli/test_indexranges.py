"""The one notation both commands print Instance indexes in."""

from __future__ import annotations

from omed.cli.indexranges import index_ranges


def test_consecutive_indexes_fold_into_a_range_and_singles_stand_alone() -> None:
    assert index_ranges([0, 1, 2, 4, 7, 8, 9]) == "0-2, 4, 7-9"


def test_order_and_repeats_of_the_input_do_not_change_the_text() -> None:
    assert index_ranges([5, 3, 1, 2, 3]) == "1-3, 5"


def test_one_index_and_no_index() -> None:
    assert index_ranges([7]) == "7"
    assert index_ranges([]) == ""
