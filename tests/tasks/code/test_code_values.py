"""What crosses between the judge and the program (corl.tasks.code.wire), and the judge's keys of it (corl.tasks.code.values).

Every expectation is written out by hand; the decoder's refusals are the point: the judge
takes nothing from the program but plain data of this format.
"""

from __future__ import annotations

import math

import pytest

from corl.tasks.code.values import MAX_TEXT, Record, canonical_text
from corl.tasks.code.wire import MAX_DEPTH, WireError, decode, dump_line, encode, load_line


def roundtrip(v):
    return decode(
        load_line(dump_line({"v": encode(v, 0, lambda o: (o._corl_class, o._corl_attrs) if type(o) is Record else None)}))["v"],
        Record,
    )


def test_plain_values_cross_exactly():
    values = [None, True, False, 0, -7, 2**80, -(2**70), 1.5, -0.0, math.inf, -math.inf, 1e-310, "é\n\x00", b"\x00\xff"]
    values += [bytearray(b"ab"), [1, [2]], (1, (2,)), (), {1, "a"}, frozenset({2}), {"a": [1], (1, 2): None}, complex(1, -2)]
    values += [range(1, 9, 2), [[]], {}]
    for v in values:
        back = roundtrip(v)
        assert back == v and type(back) is type(v), v
    assert math.copysign(1, roundtrip(-0.0)) == -1
    assert math.isnan(roundtrip(math.nan))
    assert roundtrip(True) is True  # `is True` tests keep working


def test_objects_cross_as_records_with_their_attributes():
    r = roundtrip(Record("Node", {"data": 1, "left": Record("Node", {"data": 2, "left": None}), "right": None}))
    assert r == Record("Node", {"data": 1, "left": Record("Node", {"data": 2, "left": None}), "right": None})
    assert r.left.data == 2 and r != Record("Leaf", {"data": 1})
    r.left = None  # a test's setup builds trees by setting attributes
    assert r.left is None and {r: 1}[r] == 1


@pytest.mark.parametrize(
    "wire",
    [
        {"x": 1},  # unknown tag
        {"f": 1.5},  # a float outside its hex text
        {"t": [1], "s": [1]},  # two tags
        {"s": [[1]]},  # unhashable set item
        {"d": [[[1], 2]]},  # unhashable key
        {"d": [[1]]},  # not a pair
        {"o": 3, "a": {}},  # class name not a str
        {"o": "C"},  # no attributes
        {"r": [1, 2]},  # a range needs three ints
        2**70,  # a large int outside its tag
        1.5,  # a bare JSON float
        {"i": "123"},  # large int text without 0x
    ],
)
def test_the_decoder_refuses_what_is_not_the_format(wire):
    with pytest.raises(WireError):
        decode(wire, Record)


def test_lines_are_bounded_and_strict():
    with pytest.raises(WireError):
        load_line(b'{"v": NaN}')  # bare constants
    with pytest.raises(WireError):
        load_line(b"[1, 2]")  # a message is an object
    with pytest.raises(WireError):
        load_line(b"[" * 100_000)  # nested past the parser's recursion
    deep = [1]
    for _ in range(MAX_DEPTH + 5):
        deep = [deep]
    with pytest.raises(WireError):
        encode(deep)
    with pytest.raises(WireError):
        encode(lambda: 1)  # no form for a function


def test_keys_of_sets_dicts_and_floats_are_canonical():
    assert canonical_text({8, 0}) == canonical_text({0, 8}) == "{0, 8}"  # repr: '{8, 0}' vs '{0, 8}'
    assert canonical_text(frozenset({8, 0})) == "{0, 8}"  # set == frozenset in Python: one key
    assert canonical_text({"b": 2, "a": 1}) == canonical_text({"a": 1, "b": 2}) == "{'a': 1, 'b': 2}"
    assert canonical_text([{3: {2, 1}}, ({"y": 0.5},)]) == "[{3: {1, 2}}, ({'y': 0.5},)]"
    assert canonical_text(-0.0) == canonical_text(0.0) == "0.0"
    assert canonical_text(float("nan")) == canonical_text(-float("nan")) == "nan"
    assert canonical_text(float("-inf")) == "-inf"
    assert [canonical_text(v) for v in (1, 1.0, True, None, "1", b"1")] == ["1", "1.0", "True", "None", "'1'", "b'1'"]
    assert canonical_text(complex(1, -0.0)) == "complex(1.0, 0.0)"
    assert canonical_text(set()) == "set()" and canonical_text((1,)) == "(1,)"


def test_records_key_as_class_and_sorted_attributes():
    r = Record("Pair", {"b": 2, "a": Record("Pair", {"a": 1, "b": None})})
    assert canonical_text(r) == "<Pair {'a': <Pair {'a': 1, 'b': None}>, 'b': 2}>"


def test_long_keys_end_in_a_hash_of_the_whole_value():
    a, b = canonical_text(list(range(5000))), canonical_text([*range(4999), -1])
    assert len(a) == MAX_TEXT + len("...sha1:") + 40 and a[:MAX_TEXT] == b[:MAX_TEXT] and a != b
    assert canonical_text(10**5000).startswith("0x")  # over the int-to-str limit: hex
