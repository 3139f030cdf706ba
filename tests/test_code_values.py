"""Values of programs under test, read without running their code: keys, comparisons, truth (corl.tasks.code_values).

These are the functions the sandboxed harness runs; here they run in-process on values
built by hand, each expectation written out. Hostile classes count how often their own
methods ran: never is the point.
"""

from __future__ import annotations

from collections import Counter, OrderedDict, deque, namedtuple

import pytest

from corl.tasks.code_values import MAX_TEXT, canonical_text, compare, compare_chain, plain_copy, truth

CALLS: list[str] = []


class AlwaysEqual:
    """Says it equals everything, hashes like 3, prints like 3, is true; logs every call."""

    def __eq__(self, other):
        CALLS.append("eq")
        return True

    def __ne__(self, other):
        CALLS.append("ne")
        return False

    def __hash__(self):
        CALLS.append("hash")
        return hash(3)

    def __repr__(self):
        CALLS.append("repr")
        return "3"

    def __bool__(self):
        CALLS.append("bool")
        return True

    def __lt__(self, other):
        CALLS.append("lt")
        return True


class LyingInt(int):
    def __eq__(self, other):
        CALLS.append("int-eq")
        return True

    __hash__ = int.__hash__

    def __repr__(self):
        CALLS.append("int-repr")
        return "3"

    def __int__(self):
        CALLS.append("int-int")
        return 3


class LyingList(list):
    def __eq__(self, other):
        CALLS.append("list-eq")
        return True

    def __iter__(self):
        CALLS.append("list-iter")
        return iter([1, 2])


class Node:
    def __init__(self, value):
        self.value, self.next = value, None


class ValueNode(Node):
    def __eq__(self, other):
        return isinstance(other, Node) and self.value == other.value


@pytest.fixture(autouse=True)
def no_calls():
    CALLS.clear()
    yield
    assert CALLS == [], "a hostile value's own method ran"


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


def test_builtin_subclasses_key_as_their_builtin_value():
    assert canonical_text(Counter("aab")) == canonical_text({"b": 1, "a": 2}) == "{'a': 2, 'b': 1}"
    assert canonical_text(OrderedDict([("b", 1), ("a", 2)])) == "{'a': 2, 'b': 1}"
    assert canonical_text(namedtuple("P", "x y")(1, 2)) == "(1, 2)"
    assert canonical_text(LyingInt(7)) == "7"  # its __repr__ says 3 and its __int__ says 3: neither runs
    assert canonical_text(LyingList([5])) == "[5]"  # its __iter__ would yield 1, 2
    assert canonical_text(deque([2, 1])) == "deque([2, 1])"


def test_objects_key_as_class_and_attributes_and_never_as_a_plain_value():
    assert canonical_text(AlwaysEqual()).startswith("<") and canonical_text(AlwaysEqual()) != "3"
    a = Node(1)
    a.next = Node(2)
    a.next.next = a
    assert canonical_text(a) == (f"<{__name__}.Node {{'next': <{__name__}.Node {{'next': <cycle>, 'value': 2}}>, 'value': 1}}>")
    assert canonical_text(Node) == f"<class {__name__}.Node>"


def test_long_keys_end_in_a_hash_of_the_whole_value():
    a, b = canonical_text(list(range(5000))), canonical_text([*range(4999), -1])
    assert len(a) == MAX_TEXT + len("...sha1:") + 40 and a[:MAX_TEXT] == b[:MAX_TEXT] and a != b
    assert canonical_text(10**5000).startswith("0x")  # over the int-to-str limit: hex


def test_comparisons_never_trust_the_values_own_methods():
    assert compare("Eq", AlwaysEqual(), 3) is False  # Python: True
    assert compare("NotEq", AlwaysEqual(), 3) is True
    assert compare("In", 3, [AlwaysEqual()]) is False
    assert compare("Eq", [AlwaysEqual()], [3]) is False
    hostile_set = {AlwaysEqual()}
    CALLS.clear()  # building the set hashed it; comparing it must not
    assert compare("Eq", hostile_set, {3}) is False
    assert compare("Eq", LyingInt(4), 3) is False and compare("Eq", LyingInt(3), 3) is True
    assert compare("Eq", LyingList([5]), [5]) is True and compare("Eq", LyingList([5]), [1, 2]) is False
    with pytest.raises(TypeError):
        compare("Lt", AlwaysEqual(), 3)  # an object is ordered against nothing


def test_comparisons_keep_pythons_meaning_for_honest_values():
    assert compare("Eq", 1, 1.0) and compare("Eq", [1, (2, 3)], [1.0, (2, 3)]) and not compare("Eq", [1], (1,))
    assert compare("Eq", Counter("aab"), {"a": 2, "b": 1}) and compare("Eq", namedtuple("P", "x y")(1, 2), (1, 2))
    assert compare("Lt", [1, 2], [1, 3]) and compare("In", "b", "abc") and compare("NotIn", 4, {1: 2})
    n = Node(1)
    assert compare("Is", n, n) and compare("Eq", n, n) and not compare("Eq", Node(1), Node(1))  # identity, as Python
    assert compare("Eq", ValueNode(1), ValueNode(1)) and not compare("Eq", ValueNode(1), ValueNode(2))  # by attributes
    assert compare_chain(("Lt", "LtE"), lambda: 1, lambda: 2, lambda: 2)
    assert not compare_chain(("Lt", "Lt"), lambda: 1, lambda: 0, lambda: 1 / 0)  # short-circuits before 1/0


def test_truth_of_results():
    assert truth(LyingInt(0)) is False and truth([]) is False and truth(Counter()) is False and truth("x") is True
    assert truth(Node(1)) is True  # no __bool__ / __len__ in its classes: Python's default
    with pytest.raises(TypeError):
        truth(AlwaysEqual())


def test_plain_copy_of_a_plain_value_is_the_value_itself():
    value = [1, {"a": (2.5, None)}]
    assert plain_copy(value) is value
    assert plain_copy(LyingInt(5)) == 5 and type(plain_copy(LyingInt(5))) is int
