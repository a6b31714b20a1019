"""Tests of the embedded demo panels (pipelines/examples/sipp_like.py)."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from continual_synth.pipelines.examples.sipp_like import (all_ones_panel, generate_panel,
                                                          panel_table)


@pytest.fixture(scope="module")
def default_panel() -> pa.Table:
    return generate_panel()


def as_matrix(table: pa.Table, periods: int) -> np.ndarray:
    return table["value"].to_numpy().reshape(-1, periods)


def test_schema_shape_and_order(default_panel):
    assert default_panel.schema == pa.schema([("id", pa.int64()), ("period", pa.int32()),
                                              ("value", pa.int64())])
    assert default_panel.num_rows == 23_000 * 12
    ids = default_panel["id"].to_numpy()
    periods = default_panel["period"].to_numpy()
    order = np.lexsort((periods, ids))
    np.testing.assert_array_equal(order, np.arange(len(ids)))  # sorted by id, then period
    assert len(np.unique(ids)) == 23_000
    np.testing.assert_array_equal(periods.reshape(-1, 12), np.tile(np.arange(1, 13), (23_000, 1)))
    assert set(np.unique(default_panel["value"].to_numpy())) == {0, 1}


def test_deterministic_for_a_seed(default_panel):
    assert generate_panel(seed=2021).equals(default_panel)
    assert not generate_panel(seed=2022).equals(default_panel)
    small = generate_panel(num_households=50, periods=4, seed=5)
    assert small.num_rows == 200 and small.equals(generate_panel(50, 4, 5))


def test_monthly_poverty_rate_is_realistic(default_panel):
    monthly_rate = as_matrix(default_panel, 12).mean(axis=0)
    assert np.all((monthly_rate >= 0.10) & (monthly_rate <= 0.14)), monthly_rate


def test_poverty_spells_persist(default_panel):
    poor = as_matrix(default_panel, 12).astype(bool)
    before, after = poor[:, :-1].ravel(), poor[:, 1:].ravel()
    persistence = after[before].mean()  # P(poor_t | poor_{t-1})
    entry = after[~before].mean()  # P(poor_t | not poor_{t-1})
    assert 0.8 <= persistence <= 0.92, persistence
    assert entry <= 0.03, entry
    # heterogeneity: more households are poor all year than independent months would give
    assert (poor.all(axis=1)).mean() > 0.02


def test_all_ones_panel():
    table = all_ones_panel(25, 12)
    assert table.schema == pa.schema([("id", pa.int64()), ("period", pa.int32()),
                                      ("value", pa.int64())])
    assert table.num_rows == 300 and set(table["value"].to_pylist()) == {1}
    assert table["period"].to_pylist()[:13] == list(range(1, 13)) + [1]


def test_panel_table_layout():
    table = panel_table(np.array([[0, 1], [1, 0]]), first_id=10)
    assert table.to_pydict() == {"id": [10, 10, 11, 11], "period": [1, 2, 1, 2],
                                 "value": [0, 1, 1, 0]}
