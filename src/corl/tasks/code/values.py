"""The judge's side of a program's values: records of its objects and the canonical text of behaviour keys.

Standard library only (the judge process loads this file by path). Every value the judge
holds of a program came over the wire (corl.tasks.code.wire) and is plain data: None,
bool, int, float, complex, str, bytes, bytearray, range, list, tuple, dict, set, frozenset,
or a `Record` (an object of the program or of the tests' scaffolding, as its class name and
attributes). None of the program's code comes with it, so the tests compare and test these
values with Python's own operators.

- `Record` equals a record of the same class name and equal attributes; tests may read and
  set its attributes (MBPP's tree setup builds `root.left = Node(2)` from records).
- `canonical_text` is the behaviour key of a value: repr-like, with sets and frozensets as
  one kind and sorted, dict items sorted, -0.0 written as 0.0 and every NaN as nan (what `==`
  cannot tell apart shares a key; NaN, which `==` never equates, is one key so that two
  programs returning NaN agree). Ints, floats and bools keep their own forms (`1`, `1.0`,
  `True` are three keys). A record's class name is written bare only when it is a dotted
  ASCII identifier, else as its ascii() (so `<A {}>, <B` cannot pose as two records, and a
  name with a lone surrogate or a newline gives an ASCII key). Texts over MAX_TEXT characters
  end in the SHA-1 of the whole text.
"""

from __future__ import annotations

try:  # the C module: `hashlib` would import OpenSSL
    from _sha1 import sha1 as _sha1
except ImportError:  # pragma: no cover - interpreters built without it
    from hashlib import sha1 as _sha1

MAX_TEXT = 4000
MAX_DEPTH = 200


class Record:
    """An object of the program (or of the tests' classes) as plain data: class name and attributes."""

    __slots__ = ("_corl_class", "_corl_attrs")

    def __init__(self, cls: str, attrs: dict) -> None:
        object.__setattr__(self, "_corl_class", cls)
        object.__setattr__(self, "_corl_attrs", dict(attrs))

    def __getattr__(self, name: str):
        try:
            return self._corl_attrs[name]
        except KeyError:
            raise AttributeError(f"{self._corl_class} record has no attribute {name!r}") from None

    def __setattr__(self, name: str, value) -> None:
        self._corl_attrs[name] = value

    def __eq__(self, other) -> bool:
        if type(other) is not Record:
            return NotImplemented
        return self._corl_class == other._corl_class and self._corl_attrs == other._corl_attrs

    def __hash__(self) -> int:
        return hash(canonical_text(self))

    def __repr__(self) -> str:
        return canonical_text(self)


def record_parts(r: Record) -> tuple[str, dict]:
    """(class name, attributes) of a record, for sending it back to the program."""
    return r._corl_class, r._corl_attrs


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
    text = _text(v, 0)
    if len(text) <= MAX_TEXT:
        return text
    return text[:MAX_TEXT] + "...sha1:" + _sha1(text.encode("utf-8", "backslashreplace")).hexdigest()


def _text(v, depth: int) -> str:
    t = type(v)
    if t is float:
        return _float_text(v)
    if t is int:
        return _int_text(v)
    if t is complex:
        return "complex(" + _float_text(v.real) + ", " + _float_text(v.imag) + ")"
    if v is None or t in (bool, str, bytes, bytearray, range):
        return repr(v)
    if depth > MAX_DEPTH:
        return "<deep>"
    if t is dict:
        return _container_text(dict, v.items(), depth)
    if t in (list, tuple, set, frozenset):
        return _container_text(t, v, depth)
    if t is Record:
        return "<" + _name_text(v._corl_class) + " " + _container_text(dict, v._corl_attrs.items(), depth) + ">"
    return "<" + t.__name__ + ">"  # the judge's own values only (a prompt helper's result, say)


def _name_text(name) -> str:
    """A record's class name in a key: bare when a dotted identifier, else its ascii() (quoted, escaped: keys stay injective and ASCII-clean)."""
    if type(name) is str and name.isascii() and all(part.isidentifier() for part in name.split(".")):
        return name
    return ascii(name)


def _container_text(t: type, items, depth: int) -> str:
    if t is dict:
        pairs = sorted(_text(k, depth + 1) + ": " + _text(x, depth + 1) for k, x in items)
        return "{" + ", ".join(pairs) + "}"
    parts = [_text(x, depth + 1) for x in items]
    if t in (set, frozenset):
        return "{" + ", ".join(sorted(parts)) + "}" if parts else "set()"
    if t is tuple:
        return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"
    return "[" + ", ".join(parts) + "]"
