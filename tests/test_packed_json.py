"""State documents with packed numeric arrays (transforms/packed_json.py)."""
import json

import numpy as np
import pytest

from continual_synth.mechanisms.errors import StateError
from continual_synth.pipelines.release import release_dir
from continual_synth.transforms import packed_json


def _document(rng):
    return {"kind": "tabular", "period": 7, "name": "ünïcode",
            "model": {"marginals": [rng.random((12, 30)).tolist(), rng.random(5).tolist()],
                      "cliques": [["a", "b"], ["c"]], "total": 1234.5},
            "counts": list(range(100)), "big_ints": [2**40 + i for i in range(70)],
            "array": rng.standard_normal(200), "int_array": np.arange(64, dtype=np.int32),
            "special": [float("inf"), -0.0, 1e-310] * 30, "flags": [True, False] * 40,
            "ragged": [[1.0, 2.0], [3.0]] * 40, "none": None, "empty": []}


def test_round_trip_is_exact_and_reads_as_the_plain_document():
    rng = np.random.default_rng(0)
    document = _document(rng)
    data = packed_json.dumps(document)
    plain = json.loads(json.dumps(document, default=lambda a: a.tolist()))
    back = packed_json.loads(data)
    assert back == plain  # every float bit-for-bit, ints as ints, shapes kept
    assert np.array_equal(np.asarray(back["special"]), np.asarray(plain["special"]))
    assert str(back["special"][1]) == "-0.0"
    text = data.decode("utf-8")
    # the large arrays are packed (the 12 × 30 clique table, the counts, the arrays) ...
    assert text.count('"__array__"') == 6
    # ... the small ones stay legible, and so do booleans and ragged lists
    assert '"cliques":[["a","b"],["c"]]' in text and "[true,false," in text
    assert len(data) < 0.6 * len(json.dumps(plain, indent=2))


def test_plain_json_reads_unchanged(tmp_path):
    """A state written before packing (indented JSON, plain lists) reads as before."""
    document = _document(np.random.default_rng(1))
    plain = json.dumps(document, indent=2, default=lambda a: a.tolist())
    path = tmp_path / "v000003.json"
    path.write_text(plain)
    assert release_dir.read_json(str(path)) == json.loads(plain)


def test_a_damaged_packed_array_is_a_state_error(tmp_path):
    data = packed_json.dumps({"values": list(np.arange(100.0))}).decode("utf-8")
    path = tmp_path / "v000001.json"
    path.write_text(data.replace('"base64":"', '"base64":"###'))
    with pytest.raises(StateError, match="not readable JSON"):
        release_dir.read_json(str(path))


def test_mixed_integer_and_float_lists_come_back_as_equal_floats():
    mixed = [0, 0.5] * 40
    back = packed_json.loads(packed_json.dumps({"x": mixed}))["x"]
    assert back == mixed and all(isinstance(v, float) for v in back)
