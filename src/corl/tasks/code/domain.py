"""Test inputs across the input domain, for the extra tests (corl.tasks.code.plus): far from the shown calls, within what they share.

The vote's mutants (corl.tasks.code.inputs) are one or two small edits of a shown call; where
a function's answer is locally constant, the shown answer carries over to them, so a table of
the prompt's asserts plus "answer like the nearest shown call" passed 27 of MBPP's 500 rows.
These inputs are made the way EvalPlus makes its own (Liu et al. 2023, type-aware
mutation), here without a model's seed inputs or hand-written contracts:

- a walk: each new input starts from a random member of a pool that grows with every input
  taken (the shown calls first) and takes 1 to 5 type-aware steps, so mutants of mutants
  walk away from the shown calls; a step moves a number by a little or a lot, scales it,
  regrows it anywhere in its range or takes an ingredient (a number or word of the shown
  calls); edits, regrows or splices a string; drops, inserts, repeats, swaps, changes or
  regrows the items of a list, tuple, set or dict;
- a contract inferred from the shown calls (MBPP has no written one), because a reference's
  answer on an input outside it (an unsorted list to a binary search) is no answer another
  correct solution must give: what every shown value of an argument has, every generated one
  keeps (`Shape`): its type, sign, non-emptiness, sortedness, distinct items, a tuple's
  length, a string's alphabet, or its format when all shown strings share one (a date, a
  number, an address: runs of one character class and fixed separators); and between
  arguments, an int that always equals a sequence's length, stays inside it as an index or a
  count, or stays at most another int;
- bounded: numbers within 4x the largest magnitude shown (at least 20; floats all within
  [0, 1] stay there, a probability or a fraction), strings and
  containers at most twice the longest shown plus 5, calls under MAX_CALL_CHARS;
- deterministic: seeded by SHA-256 of the shown calls, the same in every process.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass, field

from corl.tasks.code.inputs import _call_text, _literal_args

MAX_STEPS = 5
MAX_CALL_CHARS = 1000
_TRIES_PER_INPUT = 12


def _class(c: str) -> str:
    return "a" if c.islower() else "A" if c.isupper() else "0" if c.isdigit() else " " if c.isspace() else c


def _runs(s: str) -> list[tuple[str, int]]:
    """(character class or the literal separator, run length) of a string, runs of one class merged."""
    runs: list[tuple[str, int]] = []
    for c in s:
        k = _class(c)
        if runs and runs[-1][0] == k and k in "aA0 ":
            runs[-1] = (k, runs[-1][1] + 1)
        else:
            runs.append((k, 1))
    return runs


_POOLS = {"a": "abcdefghijklmnopqrstuvwxyz", "A": "ABCDEFGHIJKLMNOPQRSTUVWXYZ", "0": "0123456789", " ": " "}


@dataclass
class Shape:
    """What every shown value of one argument (or one item position) has in common."""

    kind: type
    lo: float = float("-inf")  # numbers
    hi: float = float("inf")
    min_len: int = 0  # str and containers
    max_len: int = 0
    alphabet: str = ""
    formats: list = field(default_factory=list)  # str: the shared run signature's length ranges, or []
    fixed_len: int | None = None  # tuples of one length: a record, item by item
    items: list = field(default_factory=list)  # element Shape (one) or per-position Shapes (fixed tuples)
    keys: Shape | None = None
    sorted: bool = False
    distinct: bool = False
    ingredients: list = field(default_factory=list)


def infer(samples: list) -> Shape | None:
    """The shape of these shown values; None when they do not share a type (no contract: left as shown)."""
    kind = type(samples[0])
    if any(type(s) is not kind for s in samples):
        return None
    shape = Shape(kind, ingredients=list(dict.fromkeys(samples)) if kind in (int, float, str) else [])
    if kind in (int, float):
        big = max(max(abs(s) for s in samples) * 4, 20)
        shape.lo = 0 if min(samples) >= 0 else -big
        shape.lo = 1 if min(samples) >= 1 else shape.lo
        shape.hi = big if kind is int else 1.0 if shape.lo >= 0 and max(samples) <= 1 else float(big)  # a fraction stays one
    elif kind is str:
        _sized(shape, samples)
        shape.alphabet = "".join(sorted({ch for s in samples for ch in s} | {ch for s in samples for ch in _class_pool(s)}))
        shape.ingredients += [w for s in samples for w in s.split() if w != s]
        signatures = {tuple(k for k, _ in _runs(s)) for s in samples}
        if len(signatures) == 1 and samples[0]:
            lengths = list(zip(*[[n for _, n in _runs(s)] for s in samples]))
            shape.formats = [(k, min(ns), max(ns) * 2 + 1) for (k, _), ns in zip(_runs(samples[0]), lengths)]
    elif kind in (list, tuple, set, frozenset):
        _sized(shape, samples)
        flat = [x for s in samples for x in s]
        if kind is tuple and len({len(s) for s in samples}) == 1 and not (len(samples[0]) >= 3 and infer(flat) is not None):
            shape.fixed_len = len(samples[0])  # a record (mixed items or a pair): item by item, its length kept
            shape.items = [infer([s[i] for s in samples]) for i in range(shape.fixed_len)]
        else:
            item = infer(flat) if flat else None
            shape.items = [item] if item is not None else []
            shape.ingredients = flat if item is None else []  # mixed items: new ones are copies of shown ones
            ordered = [list(s) for s in samples if kind in (list, tuple) and len(s) >= 2]
            shape.sorted = bool(ordered) and all(_is_sorted(s) for s in ordered)
            shape.distinct = kind in (set, frozenset) or (
                any(len(s) >= 3 for s in samples) and all(len(set(map(repr, s))) == len(s) for s in samples)
            )
    elif kind is dict:
        _sized(shape, samples)
        keys, values = [k for s in samples for k in s], [v for s in samples for v in s.values()]
        shape.keys = infer(keys) if keys else None
        shape.items = [infer(values)] if values else []
    return shape


def _class_pool(s: str) -> str:
    return "".join(_POOLS[k] for k in {_class(c) for c in s} if k in _POOLS)


def _sized(shape: Shape, samples: list) -> None:
    shape.min_len = 1 if all(len(s) for s in samples) else 0
    shape.max_len = max(len(s) for s in samples) * 2 + 5


def _is_sorted(xs: list) -> bool:
    try:
        return all(a <= b for a, b in zip(xs, xs[1:]))
    except TypeError:
        return False


class Walker:
    """Type-aware steps and fresh values within a shape (module docstring), from one seeded random generator."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def fresh(self, shape: Shape | None, depth: int = 0):
        """A new value of the shape, anywhere in its range."""
        rng, kind = self.rng, shape.kind if shape else None
        if shape is None or kind is type(None):
            return None
        if kind is bool:
            return rng.random() < 0.5
        if kind in (int, float):
            return self._number(shape)
        if kind is str:
            return self._string(shape)
        if depth > 4:
            return kind() if kind is not tuple or shape.fixed_len is None else None
        if kind in (list, tuple, set, frozenset):
            if shape.fixed_len is not None:
                return tuple(self.fresh(s, depth + 1) for s in shape.items)
            n = rng.randint(shape.min_len, max(shape.min_len, shape.max_len))
            if not shape.items:
                return kind(rng.choice(shape.ingredients) for _ in range(n)) if shape.ingredients else kind()
            return kind(self.fresh(shape.items[0], depth + 1) for _ in range(n))
        if kind is dict:
            n = rng.randint(shape.min_len, max(shape.min_len, shape.max_len // 2))
            if shape.keys is None or not shape.items:
                return {}
            return {self.fresh(shape.keys, depth + 1): self.fresh(shape.items[0], depth + 1) for _ in range(n)}
        return None

    def _number(self, shape: Shape):
        rng = self.rng
        if shape.ingredients and rng.random() < 0.2:
            return rng.choice(shape.ingredients)
        if shape.kind is int:
            lo, hi = int(shape.lo), int(shape.hi)
            small = rng.randint(max(lo, -10), min(hi, 10)) if max(lo, -10) <= min(hi, 10) else lo
            return small if rng.random() < 0.3 else rng.randint(lo, hi)
        return round(rng.uniform(shape.lo, shape.hi), rng.choice((1, 2, 3)))

    def _string(self, shape: Shape) -> str:
        rng = self.rng
        if shape.formats:
            return "".join(
                k * 1 if k not in _POOLS else "".join(rng.choice(_POOLS[k]) for _ in range(rng.randint(lo, hi)))
                for k, lo, hi in shape.formats
            )
        if shape.ingredients and rng.random() < 0.3:
            words = [rng.choice(shape.ingredients) for _ in range(rng.randint(1, 4))]
            return " ".join(words)[: shape.max_len]
        n = rng.randint(shape.min_len, max(shape.min_len, shape.max_len))
        return "".join(rng.choice(shape.alphabet or "a") for _ in range(n))

    def step(self, value, shape: Shape | None, depth: int = 0):
        """One type-aware move of `value` (a small or a large one), or a fresh value of its shape."""
        rng = self.rng
        if shape is None or rng.random() < 0.15:
            return self.fresh(shape, depth) if shape is not None else value
        kind = shape.kind
        if kind is bool:
            return not value
        if kind is int:
            return rng.choice((value + rng.choice((-3, -2, -1, 1, 2, 3)), value * 2, value // 2, -value, self._number(shape)))
        if kind is float:
            return rng.choice((value + rng.uniform(-1, 1), value * rng.uniform(0.2, 3.0), -value, self._number(shape)))
        if kind is str:
            return self._step_string(value, shape)
        if kind in (list, tuple, set, frozenset) and depth < 5:
            return self._step_items(value, shape, depth)
        if kind is dict and depth < 5 and shape.keys is not None and shape.items:
            items = dict(value)
            op = rng.randrange(3) if items else 1
            if op == 0:
                del items[rng.choice(list(items))]
            elif op == 1:
                items[self.fresh(shape.keys, depth + 1)] = self.fresh(shape.items[0], depth + 1)
            else:
                key = rng.choice(list(items))
                items[key] = self.step(items[key], shape.items[0], depth + 1)
            return items
        return value

    def _step_string(self, s: str, shape: Shape) -> str:
        rng = self.rng
        if shape.formats:
            return self._string(shape)
        op = rng.randrange(5) if s else 1
        i = rng.randrange(len(s) + 1)
        j = rng.randint(i, len(s))
        alphabet = shape.alphabet or "a"
        if op == 0:  # replace a part
            return s[:i] + "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 3))) + s[j:]
        if op == 1:  # insert an ingredient or a character
            piece = rng.choice(shape.ingredients) if shape.ingredients and rng.random() < 0.5 else rng.choice(alphabet)
            return s[:i] + piece + s[i:]
        if op == 2:  # repeat a part
            return s[:j] + s[i:j] + s[j:]
        if op == 3:  # words shuffled
            words = s.split(" ")
            rng.shuffle(words)
            return " ".join(words)
        return s[:i] + s[j:]  # cut a part

    def _step_items(self, value, shape: Shape, depth: int):
        rng, kind = self.rng, shape.kind
        items = list(value)
        if shape.fixed_len is not None:
            if items:
                i = rng.randrange(len(items))
                items[i] = self.step(items[i], shape.items[i] if i < len(shape.items) else None, depth + 1)
            return tuple(items)
        item_shape = shape.items[0] if shape.items else None
        op = rng.randrange(6) if items else 1
        i = rng.randrange(len(items)) if items else 0
        if op == 0:
            del items[i]
        elif op == 1:
            new = self.fresh(item_shape, depth + 1) if item_shape else rng.choice(shape.ingredients or items or [None])
            items.insert(rng.randint(0, len(items)), new)
        elif op == 2:
            items.insert(rng.randint(0, len(items)), items[i])
        elif op == 3:
            rng.shuffle(items)
        elif op == 4:
            items[i] = self.step(items[i], item_shape, depth + 1)
        else:
            return self.fresh(shape, depth)
        return kind(items)


def fit(value, shape: Shape | None, depth: int = 0):
    """`value` brought within its shape: numbers clamped, lengths cut or grown, items sorted or made distinct."""
    if shape is None or type(value) is not shape.kind:
        return value
    kind = shape.kind
    if kind in (int, float):
        return kind(min(max(value, shape.lo), shape.hi))
    if kind is str:
        value = value[: shape.max_len]
        return value if len(value) >= shape.min_len else value + (shape.alphabet or "a")[0] * (shape.min_len - len(value))
    if kind in (list, tuple, set, frozenset) and depth < 6:
        if shape.fixed_len is not None:
            return tuple(fit(x, s, depth + 1) for x, s in zip(value, shape.items))
        items = [fit(x, shape.items[0] if shape.items else None, depth + 1) for x in value][: shape.max_len]
        if shape.distinct:
            items = list({repr(x): x for x in items}.values())
        if shape.sorted and _is_sorted(sorted(items, key=_order)):
            items = sorted(items, key=_order)
        return kind(items) if len(items) >= shape.min_len else None
    if kind is dict:
        items = list(value.items())[: shape.max_len]
        return dict(items) if len(items) >= shape.min_len else None
    return value


def _order(x):
    return (0, x) if isinstance(x, int | float) and not isinstance(x, bool) else (1, repr(x))


def relations(calls: list[tuple[list, dict]]) -> list[tuple[str, int, int]]:
    """Between the positional arguments of every shown call: ("len", i, j) arg i == len(arg j); ("index", i, j)
    0 <= arg i < len(arg j); ("count", i, j) 0 <= arg i <= len(arg j); ("le", i, j) arg i <= arg j (ints)."""
    n = min(len(a) for a, _ in calls)
    found = []
    for i in range(n):
        if not all(type(a[i]) is int for a, _ in calls):
            continue
        for j in range(n):
            if i == j:
                continue
            if all(isinstance(a[j], str | list | tuple) for a, _ in calls):
                sized = [(a[i], len(a[j])) for a, _ in calls]
                for name, holds in (
                    ("len", lambda v, m: v == m),
                    ("index", lambda v, m: 0 <= v < m),
                    ("count", lambda v, m: 0 <= v <= m),
                ):
                    if all(holds(v, m) for v, m in sized):
                        found.append((name, i, j))
                        break
            elif (
                all(type(a[j]) is int for a, _ in calls)
                and all(a[i] <= a[j] for a, _ in calls)
                and any(a[i] < a[j] for a, _ in calls)
            ):
                found.append(("le", i, j))
    return found


def _keep(args: list, rels: list, rng: random.Random) -> list | None:
    """The arguments with every relation held (an index or count redrawn inside its sequence); None if none can be."""
    for name, i, j in rels:
        if name == "le":
            if args[i] > args[j]:
                args[i], args[j] = args[j], args[i]
            continue
        size = len(args[j]) if isinstance(args[j], str | list | tuple) else None
        if size is None:
            return None
        if name == "len":
            args[i] = size
        elif name == "index" and not 0 <= args[i] < size:
            if size == 0:
                return None
            args[i] = rng.randrange(size)
        elif name == "count" and not 0 <= args[i] <= size:
            args[i] = rng.randint(0, size)
    return args


def domain_inputs(shown: list[str], n: int, exclude: list[str] = ()) -> list[str]:
    """Up to `n` calls of the shown calls' function across its input domain (module docstring), none equal to a
    shown call or to one of `exclude`; [] when no shown call has literal arguments."""
    parsed = [p for p in (_literal_args(c) for c in shown) if p is not None]
    if not parsed:
        return []
    name = parsed[0][0]
    parsed = [p for p in parsed if p[0] == name and len(p[1]) == len(parsed[0][1]) and set(p[2]) == set(parsed[0][2])]
    calls = [(list(a), dict(k)) for _, a, k in parsed]
    shapes = [infer([a[i] for a, _ in calls]) for i in range(len(calls[0][0]))]
    kw_shapes = {key: infer([k[key] for _, k in calls]) for key in calls[0][1]}
    rels = relations(calls)
    rng = random.Random(int.from_bytes(hashlib.sha256("\n".join(shown).encode()).digest()[:8], "big"))
    walker = Walker(rng)
    seen = {_call_text(name, a, k) for a, k in calls} | set(exclude)
    pool, found = list(calls), []
    for _ in range(n * _TRIES_PER_INPUT):
        if len(found) >= n:
            break
        args, kwargs = (list(x) if isinstance(x, list) else dict(x) for x in rng.choice(pool))
        for _ in range(rng.randint(1, MAX_STEPS)):
            keys = list(range(len(args))) + list(kwargs)
            if not keys:
                break
            key = rng.choice(keys)
            if isinstance(key, int):
                args[key] = walker.step(args[key], shapes[key])
            else:
                kwargs[key] = walker.step(kwargs[key], kw_shapes[key])
        args = [fit(a, s) for a, s in zip(args, shapes)]
        kwargs = {k: fit(v, kw_shapes[k]) for k, v in kwargs.items()}
        if any(a is None for a, s in zip(args, shapes) if s is not None and s.kind is not type(None)):
            continue
        args = _keep(args, rels, rng)
        if args is None:
            continue
        text = _call_text(name, args, kwargs)
        if text not in seen and len(text) <= MAX_CALL_CHARS:
            seen.add(text)
            found.append(text)
            pool.append((args, kwargs))
    return found
