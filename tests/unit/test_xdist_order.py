"""The order in which ``tests/xdist_groups.py`` hands out units of work: groups first, then each
folder's tests spread evenly over the run, each folder in its own order."""

from __future__ import annotations

from tests.xdist_groups import spread


def test_groups_stay_in_front_in_their_order() -> None:
    scopes = ["cluster-1", "docs-site", "tests/unit/test_a.py::t", "cluster-2"]
    assert spread(scopes)[:3] == ["cluster-1", "docs-site", "cluster-2"]


def test_each_folder_is_spread_over_the_whole_run_in_its_own_order() -> None:
    fake = [f"tests/fake/test_f.py::t{i}" for i in range(2)]
    unit = [f"tests/unit/test_u{i}.py::t" for i in range(6)]
    order = spread(fake + unit)
    assert sorted(order) == sorted(fake + unit)
    assert [s for s in order if s in fake] == fake
    assert [s for s in order if s in unit] == unit
    # the fake folder's two tests sit a quarter and three quarters of the way through
    assert [order.index(s) for s in fake] == [1, 5]


def test_a_parameter_with_a_slash_does_not_make_a_folder() -> None:
    scopes = ["tests/io/test_x.py::t[a/b]", "tests/io/test_x.py::t[c]"]
    assert spread(scopes) == scopes
