"""Values a program under test returns, read without running any of its code: truth, comparisons, keys.

This module runs inside the sandbox (shipped as source ahead of `corl.tasks.code_harness`,
loaded before the program under test) and on the host, where the tests check it directly.
It imports only the standard library and reads values through the builtin types' own
C-level accessors (`int.__int__(v)`, `list.__getitem__(v, slice(None))`, the type's
`__dict__` getset descriptor, ...), so a value's class can override `__eq__`, `__hash__`,
`__bool__`, `__repr__`, `__iter__`, `keys` or `__class__` without any of that code running.

- *Plain* values are built only from exact builtin types: None, bool, int, float, complex,
  str, bytes, bytearray, range, list, tuple, dict, set, frozenset, classes whose metaclass
  is `type`, and the immutable C types Decimal and datetime's date/time/datetime/timedelta.
  Their comparisons are the interpreter's own, so `compare` leaves them to Python.
- Any other value is first made plain (`plain_copy`): an instance of a subclass of a builtin
  type becomes its builtin value (an `int` subclass whose `__eq__` says True to everything is
  just its integer; a Counter or OrderedDict is its dict; a namedtuple its tuple); an object
  of any other class becomes a private marker of its class name and the canonical text of its
  attributes (its identity when its class leaves `__eq__` to `object`, as Python does), which
  equals no value a test can write and no other object's marker unless class and attributes
  agree.
- `truth` is Python's truth for plain values and builtin subclasses; for other objects it is
  True when no class in the MRO defines `__bool__` or `__len__` (Python's own default) and
  an error otherwise (a result whose truth its class decides is not trusted).
- `canonical_text` is the behaviour key of a value: repr-like, with sets and frozensets as
  one kind and sorted, dict items sorted, -0.0 written as 0.0 and every NaN as nan (what `==`
  cannot tell apart shares a key; NaN, which `==` never equates, is one key so that two
  programs returning NaN agree). Ints, floats and bools keep their own forms (`1`, `1.0`,
  `True` are three keys), as they did when the key was `repr`. Texts over MAX_TEXT characters
  end in the SHA-1 of the whole text.
"""

from __future__ import annotations

import datetime as _datetime
import decimal as _decimal
import operator as _operator
import types as _types
from collections import deque as _deque

try:  # the C module: `hashlib` would import OpenSSL, ~25 ms per sandboxed program
    from _sha1 import sha1 as _sha1
except ImportError:  # pragma: no cover - interpreters built without it
    from hashlib import sha1 as _sha1

MAX_TEXT = 4000
MAX_DEPTH = 100  # nesting the comparisons and keys follow (Python's own repr stops near 1000)

_SCALARS = frozenset({type(None), bool, int, float, complex, str, bytes, bytearray, range})
_CONTAINERS = frozenset({list, tuple, set, frozenset, dict})
_C_ATOMS = frozenset({_decimal.Decimal, _datetime.date, _datetime.time, _datetime.datetime, _datetime.timedelta})
_CALLABLES = frozenset({_types.FunctionType, _types.BuiltinFunctionType, _types.MethodType})
_BASES = (int, float, complex, str, bytes, bytearray, tuple, list, dict, frozenset, set)
_WHOLE = slice(None)

# C-level readers, taken before any program runs (a program cannot rebind these names here)
_type_dict = type.__dict__["__dict__"].__get__  # class -> mappingproxy of its own namespace
_type_mro = type.__dict__["__mro__"].__get__
_type_module = type.__dict__["__module__"].__get__
_type_qualname = type.__dict__["__qualname__"].__get__
_GETSET = type(type.__dict__["__dict__"])
_MEMBER = type(complex.__dict__["real"])
_complex_real = complex.__dict__["real"].__get__
_complex_imag = complex.__dict__["imag"].__get__
_OPS = {
    "Eq": _operator.eq,
    "NotEq": _operator.ne,
    "Lt": _operator.lt,
    "LtE": _operator.le,
    "Gt": _operator.gt,
    "GtE": _operator.ge,
    "In": lambda a, b: a in b,
    "NotIn": lambda a, b: a not in b,
}


class _Marker:
    """Stands for a non-builtin object: its class and state, never equal to a value a test can write."""

    __slots__ = ()


_OBJECT = _Marker()
_DEQUE = _Marker()


def _allowed_c_atoms() -> frozenset:
    """Only C types that refuse new attributes: a pure-Python stand-in could be patched by the program."""
    out = set()
    for t in _C_ATOMS:
        try:
            t._corl_probe = 1
        except TypeError:
            out.add(t)
        else:  # pragma: no cover - a pure-Python decimal/datetime
            delattr(t, "_corl_probe")
    return frozenset(out)


_ATOMS = _SCALARS | _allowed_c_atoms()


def builtin_base(t: type) -> type | None:
    """The builtin type a class derives from (bool cannot be subclassed), or None."""
    for base in _BASES:
        if issubclass(t, base):  # a real MRO check: `int`'s metaclass is exactly `type`
            return base
    return None


def base_value(v, base: type):
    """The builtin value inside an instance of a subclass of `base`, read by `base`'s own C code."""
    if base is int:
        return int.__int__(v)
    if base is float:
        return float.__float__(v)
    if base is complex:
        return complex(_complex_real(v), _complex_imag(v))
    if base is str:
        return str.__str__(v)
    if base in (bytes, bytearray, tuple, list):
        return base.__getitem__(v, _WHOLE)
    if base is dict:
        return dict.items(v)  # a C view over the real table, iterated without the subclass's methods
    return list(base.__iter__(v))  # set or frozenset


def is_plain(v, depth: int = 0, path: frozenset = frozenset()) -> bool:
    """True when `v` is built only from the exact types whose comparisons the interpreter owns."""
    t = type(v)
    if t in _ATOMS or t is type:
        return True
    if t not in _CONTAINERS or depth > MAX_DEPTH:
        return False
    if id(v) in path:
        return True  # a cycle of plain containers: Python compares it itself
    inner = path | {id(v)}
    if t is dict:
        return all(is_plain(k, depth + 1, inner) and is_plain(x, depth + 1, inner) for k, x in v.items())
    return all(is_plain(x, depth + 1, inner) for x in v)


def plain_copy(v, depth: int = 0):
    """A plain value standing for `v` (itself when already plain); see the module docstring."""
    if depth > MAX_DEPTH:
        raise ValueError("a value nested too deeply to compare")
    if depth == 0 and is_plain(v):
        return v
    t = type(v)
    if t in _ATOMS or t is type:
        return v
    if t in _CONTAINERS:
        return _plain_container(t, v, depth)
    if t is _deque:
        return (_DEQUE, tuple(plain_copy(x, depth + 1) for x in _deque.__iter__(v)))
    base = builtin_base(t)
    if base is dict:
        return {plain_copy(k, depth + 1): plain_copy(x, depth + 1) for k, x in base_value(v, dict)}
    if base in (set, frozenset):  # elements made plain before hashing, so their own __hash__ never runs
        return base(plain_copy(x, depth + 1) for x in base_value(v, base))
    if base is not None:
        return plain_copy(base_value(v, base), depth + 1)
    if not _defines(t, "__eq__"):
        return (_OBJECT, class_name(t), id(v))  # Python's own rule for such a class: identity
    return (_OBJECT, class_name(t), canonical_text(state_of(v)))


def plain_result(v):
    """What a test sees of a value a call returned: plain values, functions and classes as they are (a
    test's call of them is guarded in turn), iterators made plain item by item, anything else its plain copy."""
    t = type(v)
    if t in _ATOMS or t in _CALLABLES or issubclass(t, type) or (t in _CONTAINERS and is_plain(v)):
        return v
    if _defines(t, "__next__"):
        return _plain_items(v)
    return plain_copy(v)


def _plain_items(iterator):
    for item in iterator:
        yield plain_copy(item)


def guarded_call(entry):
    """The tests' way to call anything: the result made plain (`plain_result`), except what a class
    builds (a test's own objects, MBPP's trees of the solution's Node class), unless the class is `entry`."""

    def call(fn, /, *args, **kwargs):
        result = fn(*args, **kwargs)
        return result if issubclass(type(fn), type) and fn is not entry else plain_result(result)

    return call


def _defines(t: type, *names: str) -> bool:
    """Whether a class other than `object` in t's MRO defines one of `names`."""
    return any(name in _type_dict(cls) for cls in _type_mro(t)[:-1] for name in names)


def _plain_container(t: type, v, depth: int):
    if t is dict:
        return {plain_copy(k, depth + 1): plain_copy(x, depth + 1) for k, x in v.items()}
    return t(plain_copy(x, depth + 1) for x in v)


def class_name(t: type) -> str:
    """module.qualname of a class, read through `type`'s own descriptors and kept to safe characters."""
    module = _type_module(t)
    qual = _type_qualname(t)
    text = (module if type(module) is str else "?") + "." + (qual if type(qual) is str else "?")
    return "".join(c if c.isalnum() or c in "._<>" else "_" for c in text[:200])


def state_of(v) -> dict:
    """An object's attributes: its instance dict and its slots, read with the C descriptors only."""
    state, own_dict = {}, None
    for cls in _type_mro(type(v)):
        for name, descr in _type_dict(cls).items():
            if type(name) is not str:
                continue
            if own_dict is None and name == "__dict__" and type(descr) is _GETSET:
                own_dict = descr.__get__(v, type(v))
            elif type(descr) is _MEMBER and name not in state:
                try:  # noqa: SIM105 (contextlib is a module the program can patch; `try` is not)
                    state[name] = descr.__get__(v, type(v))
                except (AttributeError, TypeError):  # an unset slot, or a descriptor of another class
                    pass
    if type(own_dict) is dict:
        state.update(own_dict)
    return state


def truth(v) -> bool:
    """Whether `v` counts as true in a test (module docstring); never calls the value's own methods."""
    t = type(v)
    if t in _ATOMS or t in _CONTAINERS or t is type:
        return bool(v)
    base = builtin_base(t)
    if base is not None:
        return bool(dict.__len__(v)) if base is dict else bool(base_value(v, base))
    if t is _deque:
        return bool(_deque.__len__(v))
    if _defines(t, "__bool__", "__len__"):
        raise TypeError(f"the truth of a {class_name(t)} result is decided by its own class; the tests cannot trust it")
    return True


def compare(op: str, a, b) -> bool:
    """`a <op> b` for the ops of ast.Compare, on plain copies unless both sides are plain already."""
    if op == "Is":
        return a is b
    if op == "IsNot":
        return a is not b
    if not (is_plain(a) and is_plain(b)):
        a, b = plain_copy(a), plain_copy(b)
    return bool(_OPS[op](a, b))


def compare_chain(ops: tuple, *operands) -> bool:
    """`x0 op0 x1 op1 x2 ...` with each operand a thunk, evaluated once and left to right, short-circuiting."""
    left = operands[0]()
    for op, thunk in zip(ops, operands[1:]):
        right = thunk()
        if not compare(op, left, right):
            return False
        left = right
    return True


def _float_text(x: float) -> str:
    if x != x:
        return "nan"
    return "0.0" if x == 0.0 else repr(x)


def _int_text(x: int) -> str:
    try:
        return repr(x)
    except ValueError:  # over the interpreter's int-to-str digit limit; hex has none
        return hex(x)


def canonical_text(v) -> str:
    """The behaviour-key text of `v` (rules in the module docstring), at most MAX_TEXT + 46 characters."""
    text = _text(v, 0, frozenset())
    if len(text) <= MAX_TEXT:
        return text
    return text[:MAX_TEXT] + "...sha1:" + _sha1(text.encode("utf-8", "backslashreplace")).hexdigest()


def _text(v, depth: int, path: frozenset) -> str:
    t = type(v)
    if t is float:
        return _float_text(v)
    if t is int:
        return _int_text(v)
    if t is complex:
        return "complex(" + _float_text(v.real) + ", " + _float_text(v.imag) + ")"
    if t in _ATOMS:
        return repr(v)  # None, bool, str, bytes, bytearray, range, Decimal, datetime: C reprs
    if depth > MAX_DEPTH:
        return "<deep>"
    if id(v) in path:
        return "<cycle>"
    inner = path | {id(v)}
    if t in _CONTAINERS:
        return _container_text(t, v if t is not dict else v.items(), depth, inner)
    if issubclass(t, type):
        return "<class " + class_name(v) + ">"
    if t is _deque:
        return "deque(" + _container_text(list, _deque.__iter__(v), depth, inner) + ")"
    base = builtin_base(t)
    if base is not None:
        value = base_value(v, base)
        return _container_text(base, value, depth, inner) if base in (dict, set, frozenset) else _text(value, depth + 1, inner)
    return "<" + class_name(t) + " " + _container_text(dict, state_of(v).items(), depth, inner) + ">"


def _container_text(t: type, items, depth: int, path: frozenset) -> str:
    if t is dict:
        pairs = sorted(_text(k, depth + 1, path) + ": " + _text(x, depth + 1, path) for k, x in items)
        return "{" + ", ".join(pairs) + "}"
    parts = [_text(x, depth + 1, path) for x in items]
    if t in (set, frozenset):
        return "{" + ", ".join(sorted(parts)) + "}" if parts else "set()"
    if t is tuple:
        return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"
    return "[" + ", ".join(parts) + "]"
