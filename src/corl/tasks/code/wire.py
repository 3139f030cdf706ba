"""Plain data between the judge and the program under test: the only thing that crosses between them.

Standard library only: the judge process loads this file by path, and the program's stub
carries its source into the sandbox. One message is one line of JSON (at most MAX_LINE
bytes). Values are JSON with tags for what JSON lacks, one key per tagged object:

    None, bool, str, list       themselves
    int                         itself within +-2**63, else {"i": hex}
    float                       {"f": float.hex(x)}  (exact; nan, inf, -0.0 included)
    complex                     {"c": [hex re, hex im]}
    bytes / bytearray           {"b": hex} / {"ba": hex}
    tuple / set / frozenset     {"t": [...]} / {"s": [...]} / {"fs": [...]}
    dict                        {"d": [[key, value], ...]}
    range                       {"r": [start, stop, step]}
    object                      {"o": class name, "a": {attribute: value}}  (structural form)

`decode` is strict: anything else (another key, a wrong type inside a tag, nesting deeper
than MAX_DEPTH, a set of unhashable items, a set or dict whose items flood one hash
bucket) raises WireError, which the judge counts as a
failure of the call. `encode` raises WireError for values it has no form for (functions,
modules, cycles, ...). Objects are rebuilt by the caller's `make_object`: the judge makes
inert records of them, the program instances of its own classes.
"""

from __future__ import annotations

import json

MAX_LINE = 8 << 20  # bytes of one message
MAX_DEPTH = 200  # nesting of one value
MAX_ITEMS = 1 << 20  # items the program drains from an iterator it returns (it sends a list)
MAX_COLLISIONS = 256  # items of one set or dict whose hash() another item already has (hash flooding: quadratic build)
_INT_BOUND = 1 << 63
_TAGS = frozenset({"i", "f", "c", "b", "ba", "t", "s", "fs", "d", "r", "o"})


class WireError(ValueError):
    """A value or message that is not plain data of this format."""


def encode(v, depth: int = 0, as_object=None):
    """The JSON-able form of `v`; `as_object(v)` -> (class name, attrs) for other objects, or None to refuse."""
    if depth > MAX_DEPTH:
        raise WireError("a value nested too deeply (or a cycle)")
    t = type(v)
    if v is None or t is bool or t is str:
        return v
    if t is int:
        return v if -_INT_BOUND < v < _INT_BOUND else {"i": hex(v)}
    if t is float:
        return {"f": float.hex(v)}
    if t is list:
        return [encode(x, depth + 1, as_object) for x in v]
    if t is tuple:
        return {"t": [encode(x, depth + 1, as_object) for x in v]}
    if t is dict:
        return {"d": [[encode(k, depth + 1, as_object), encode(x, depth + 1, as_object)] for k, x in v.items()]}
    if t is set or t is frozenset:
        return {"s" if t is set else "fs": [encode(x, depth + 1, as_object) for x in v]}
    if t is complex:
        return {"c": [float.hex(v.real), float.hex(v.imag)]}
    if t is bytes or t is bytearray:
        return {"b" if t is bytes else "ba": bytes(v).hex()}
    if t is range:
        return {"r": [v.start, v.stop, v.step]}
    found = as_object(v) if as_object is not None else None
    if found is None:
        raise WireError(f"no plain form for a value of type {t.__name__}")
    name, attrs = found
    return {"o": str(name)[:200], "a": {str(k): encode(x, depth + 1, as_object) for k, x in attrs.items()}}


def decode(w, make_object):
    """The value a JSON-able form stands for (strict; module docstring).

    Each level of a tagged value costs several Python frames here, so a value within MAX_DEPTH
    can still pass the interpreter's recursion limit (frozensets 200 deep): that too is a
    value this side will not take, a WireError like any other, never a RecursionError the
    tests could catch as an ordinary exception."""
    try:
        return _decode(w, make_object, 0)
    except RecursionError:
        raise WireError("a value nested too deeply for this interpreter's stack") from None


def _decode(w, make_object, depth: int):
    if depth > MAX_DEPTH:
        raise WireError("a value nested too deeply")
    t = type(w)
    if w is None or t is bool or t is str or t is int:
        if t is int and not -_INT_BOUND < w < _INT_BOUND:
            raise WireError("a large int outside its tag")
        return w
    if t is list:
        return [_decode(x, make_object, depth + 1) for x in w]
    if t is dict and "o" in w:
        return _object(w, make_object, depth)
    if t is not dict or not w or not set(w) <= _TAGS:
        raise WireError(f"not a value of the wire format: {type(w).__name__}")
    if len(w) != 1:
        raise WireError("a tagged value with more than one tag")
    ((tag, x),) = w.items()
    try:
        return _TAGGED[tag](x, make_object, depth + 1)
    except WireError:
        raise
    except (TypeError, ValueError, OverflowError, KeyError) as e:
        raise WireError(f"bad {tag!r} value: {type(e).__name__}") from None


def _object(w, make_object, depth):
    name, attrs = w.get("o"), w.get("a")
    if set(w) != {"o", "a"} or type(name) is not str or type(attrs) is not dict or len(name) > 200:
        raise WireError("an object needs a class name and an attribute map")
    return make_object(name, {k: _decode(x, make_object, depth + 1) for k, x in attrs.items()})


def _items(x, make_object, depth):
    if type(x) is not list:
        raise WireError("a sequence tag needs a list")
    return [_decode(i, make_object, depth) for i in x]


def _hexfloat(x) -> float:
    if type(x) is not str or len(x) > 40:
        raise WireError("a float needs its hex text")
    return float.fromhex(x)


def _hexbytes(x) -> bytes:
    if type(x) is not str:
        raise WireError("bytes need hex text")
    return bytes.fromhex(x)


def _int(x, *_):
    if type(x) is not str or not x.lstrip("-").startswith("0x") or len(x) > 1 << 16:
        raise WireError("a large int needs its hex text")
    return int(x, 16)


def _complex(x, *_):
    if type(x) is not list or len(x) != 2:
        raise WireError("a complex needs two floats")
    return complex(_hexfloat(x[0]), _hexfloat(x[1]))


def _range(x, *_):
    if type(x) is not list or len(x) != 3 or any(type(i) is not int for i in x):
        raise WireError("a range needs three ints")
    return range(*x)


def _dict(x, make_object, depth):
    if type(x) is not list or any(type(p) is not list or len(p) != 2 for p in x):
        raise WireError("a dict needs [key, value] pairs")
    pairs = [(_decode(k, make_object, depth), _decode(v, make_object, depth)) for k, v in x]
    _few_collisions([k for k, _ in pairs])
    return dict(pairs)


def _hashed(*a) -> list:
    """The items of a set or frozenset, refused when they flood one hash bucket."""
    return _few_collisions(_items(*a))


def _few_collisions(items: list) -> list:
    """`items` unless building a set or dict of them is quadratic: Python's int (and tuple, float) hashes are not
    randomised, so k*(2**61-1) for 180k values k makes an 8 MB reply cost the judge tens of seconds. Hashing each
    item is linear; equal items (duplicates) count too, which a set the program really held never has."""
    if len(items) - len({hash(i) for i in items}) > MAX_COLLISIONS:
        raise WireError(f"a set or dict with over {MAX_COLLISIONS} colliding hashes")
    return items


_TAGGED = {
    "i": _int,
    "f": lambda x, *_: _hexfloat(x),
    "c": _complex,
    "b": lambda x, *_: _hexbytes(x),
    "ba": lambda x, *_: bytearray(_hexbytes(x)),
    "t": lambda *a: tuple(_items(*a)),
    "s": lambda *a: set(_hashed(*a)),
    "fs": lambda *a: frozenset(_hashed(*a)),
    "d": _dict,
    "r": _range,
}


def dump_line(message: dict) -> bytes:
    """One message as its line (the encoder refuses NaN outside the float tag)."""
    data = json.dumps(message, ensure_ascii=True, allow_nan=False, separators=(",", ":")).encode("ascii") + b"\n"
    if len(data) > MAX_LINE:
        raise WireError(f"a message over {MAX_LINE} bytes")
    return data


def load_line(line: bytes) -> dict:
    """One message from its line: a JSON object, or WireError."""
    try:
        message = json.loads(line, parse_constant=_no_constant)
    except (ValueError, RecursionError) as e:
        raise WireError(f"not a JSON line: {type(e).__name__}") from None
    if type(message) is not dict:
        raise WireError("a message is a JSON object")
    return message


def _no_constant(name: str):
    raise WireError(f"bare {name} outside the float tag")
