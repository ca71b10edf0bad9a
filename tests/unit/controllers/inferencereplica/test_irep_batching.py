"""The batch rules of "Pace OMENative scale-ups and scale-downs", one test per rule."""

from __future__ import annotations

from omed.config import Percent
from omed.controllers.inferencereplica.core.batching import (
    Candidate,
    budget_of,
    delete_cost,
    take_batch,
)


def indexes(batch: tuple[Candidate, ...]) -> list[int]:
    return [c.index for c in batch]


def test_whole_instances_fill_the_budget_in_order() -> None:
    queue = [Candidate(i, 3) for i in range(5)]  # a leader and two workers each
    batch, deferred = take_batch(queue, 9)
    assert indexes(batch) == [0, 1, 2]
    assert indexes(deferred) == [3, 4]


def test_first_instance_may_exceed_the_budget_and_then_proceeds_alone() -> None:
    queue = [Candidate(0, 8), Candidate(1, 1), Candidate(2, 1)]
    batch, deferred = take_batch(queue, 5)
    assert indexes(batch) == [0]
    assert indexes(deferred) == [1, 2]


def test_an_instance_past_the_budget_waits_even_if_a_later_one_would_fit() -> None:
    queue = [Candidate(0, 3), Candidate(1, 4), Candidate(2, 1)]
    batch, deferred = take_batch(queue, 5)
    assert indexes(batch) == [0]
    assert indexes(deferred) == [1, 2]


def test_no_budget_means_everything_at_once() -> None:
    queue = [Candidate(i, 4) for i in range(50)]
    batch, deferred = take_batch(queue, None)
    assert len(batch) == 50
    assert deferred == ()


def test_an_empty_queue_gives_an_empty_batch() -> None:
    assert take_batch([], 5) == ((), ())


def test_scale_down_cost_is_the_remaining_pods_or_one_for_cleanup() -> None:
    assert delete_cost(3, cleanup_running=False) == 3
    assert delete_cost(3, cleanup_running=True) == 3  # live and Terminating alike
    assert delete_cost(0, cleanup_running=True) == 1  # pods gone, cleanup still runs
    assert delete_cost(0, cleanup_running=False) == 0


def test_ten_percent_bounds_a_pass_to_a_tenth_of_the_footprint_rounded_up() -> None:
    assert budget_of(Percent(10), 200) == 20
    assert budget_of(Percent(10), 19) == 2  # 1.9 rounds up
    assert budget_of(Percent(10), 20) == 2


def test_a_percentage_is_never_below_one_so_a_small_component_progresses() -> None:
    assert budget_of(Percent(10), 3) == 1
    assert budget_of(Percent(1), 0) == 1


def test_a_count_is_used_as_is_and_none_is_unbounded() -> None:
    assert budget_of(50, 3) == 50
    assert budget_of(None, 1000) is None
