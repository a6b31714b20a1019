"""Tests of mechanisms/hierarchy.py: the hierarchical binary decomposition of [0,1]^d
(level ℓ cuts coordinate ℓ mod d), θ indexing, cell boxes and input validation."""
from __future__ import annotations

import numpy as np
import pytest

from continual_synth.mechanisms import hierarchy
from continual_synth.mechanisms.errors import InputError


@pytest.mark.parametrize("dims", [1, 2, 3])
def test_cells_contain_their_points_and_nest(dims):
    rng = np.random.default_rng(dims)
    points = rng.random((5000, dims))
    points[:3] = [1.0] * dims, [0.0] * dims, [0.5] * dims  # the edges
    depth = 12
    deepest = hierarchy.leaf_index(points, depth)
    for level in range(depth + 1):
        theta = hierarchy.leaf_index(points, level)
        assert theta.max() < 2 ** level
        np.testing.assert_array_equal(theta, hierarchy.ancestors(deepest, depth, level))
        corners, sides = hierarchy.cell_boxes(theta, level, dims)
        assert np.all(points >= corners - 1e-15) and np.all(points <= corners + sides + 1e-15)
        np.testing.assert_allclose(sides, hierarchy.cell_sides(level, dims))
        assert hierarchy.cuts_per_coordinate(level, dims).sum() == level


def test_level_cuts_coordinate_level_mod_d():
    # d = 2, level 4 is a 4 × 4 grid; θ's bits alternate x, y, x, y (first cut = MSB)
    points = np.array([[0.1, 0.9], [0.6, 0.1], [0.9, 0.9]])
    theta = hierarchy.leaf_index(points, 4)
    # x cell q_x, y cell q_y at 2 bits each: θ = x1 y1 x0 y0
    expected = []
    for x, y in points:
        qx, qy = int(x * 4), int(y * 4)
        expected.append(((qx >> 1) << 3) | ((qy >> 1) << 2) | ((qx & 1) << 1) | (qy & 1))
    np.testing.assert_array_equal(theta, expected)
    assert hierarchy.diameter(4, 2) == pytest.approx(np.sqrt(2) / 4)
    assert hierarchy.diameter(3, 2) == pytest.approx(np.sqrt(0.25 ** 2 + 0.5 ** 2))


def test_cells_of_a_level_partition_the_cube():
    """Uniform points fall into every level-ℓ cell in proportion to its volume 2^-ℓ."""
    rng = np.random.default_rng(0)
    level, n = 6, 640_000
    theta = hierarchy.leaf_index(rng.random((n, 2)), level)
    counts = np.bincount(theta.astype(np.int64), minlength=2 ** level)
    expected = n / 2 ** level
    assert np.all(np.abs(counts - expected) < 6 * np.sqrt(expected))


def test_bounds_parse_scale_and_validate():
    bounds = hierarchy.Bounds.parse("0:10,-1:1", 2)
    assert bounds.low == (0.0, -1.0) and bounds.high == (10.0, 1.0)
    assert hierarchy.Bounds.parse("0:2", 3).high == (2.0, 2.0, 2.0)
    np.testing.assert_allclose(bounds.from_unit(bounds.to_unit([[5.0, 0.5]])), [[5.0, 0.5]])
    with pytest.raises(InputError, match="2 low:high"):
        hierarchy.Bounds.parse("0:1,0:1,0:1", 2)
    with pytest.raises(InputError, match="low < high"):
        hierarchy.Bounds.parse("1:0", 1)
    with pytest.raises(InputError, match="low:high"):
        hierarchy.Bounds.parse("a:b", 1)


def test_check_points_names_column_and_row():
    bounds = hierarchy.Bounds.parse("0:1,0:1", 2)
    good = np.array([[0.1, 0.2], [0.3, 0.4]])
    with pytest.raises(InputError, match=r"column 'y'.*non-finite.*row 12"):
        hierarchy.check_points(np.array([[0.1, 0.2], [0.3, np.nan]]), bounds, ["x", "y"],
                               False, row_offset=10)
    with pytest.raises(InputError, match=r"column 'x' value 1.5 at row 2 is outside"):
        hierarchy.check_points(np.array([[0.1, 0.2], [1.5, 0.4]]), bounds, ["x", "y"], False)
    with pytest.raises(InputError, match="non-finite"):  # --clip does not cover NaN/inf
        hierarchy.check_points(np.array([[np.inf, 0.2]]), bounds, ["x", "y"], True)
    unit, clipped = hierarchy.check_points(np.array([[-3, 0.2], [1.5, 7], [0.5, 0.5]]),
                                           bounds, ["x", "y"], True)
    assert clipped == 2
    np.testing.assert_allclose(unit, [[0, 0.2], [1, 1], [0.5, 0.5]])
    unit, clipped = hierarchy.check_points(good, bounds, ["x", "y"], False)
    assert clipped == 0
