"""Completions that try to pass without solving the problem, through every consumer of code results.

Each hostile completion runs in the real sandbox through `corl.evaluation.code_eval.evaluate` (what
`corl eval --task code` grades with), the suite's code grader, the `tests` reward (GT-Reward
for code) and the code vote (behaviour keys). Honest completions of the same problems run
alongside and must pass, so a judge that failed everything would fail these tests too.

The judge runs the tests in its own process (corl.tasks.code.judge) and sees the program's
values as plain data only, so lying values, patched builtins and modules, forged lines and
exits all end in a failure; tests/tasks/code/test_code_attacks.py holds the attacks on the judge
itself, with the exact status each must end in. The forged lines below are replies of the
current wire format (corl.tasks.code.wire) written on every fd.
"""

from __future__ import annotations

import json

import pytest

from corl.evaluation.code_eval import evaluate
from corl.evaluation.suite.graders import Item, grade_code
from corl.evaluation.suite.protocol import Benchmark
from corl.rewards.registry import reward_spec
from corl.sandbox import SandboxPool
from corl.tasks.code.task import prepare_row
from corl.tasks.registry import task_spec

ADD = {
    "task_id": "add",
    "text": "Write a function to add two numbers.",
    "code": "def add(a, b):\n    return a + b",
    "test_list": ["assert add(1, 2) == 3", "assert add(2, 5) == 7", "assert add(-1, 1) == 0"],
    "test_setup_code": "",
}
AREA = {
    "task_id": "area",
    "text": "Write a function for the area of a circle.",
    "code": "def area(r):\n    return 3.14159 * r * r",
    "test_list": ["assert abs(area(2) - 12.566) < 0.001", "assert abs(area(1) - 3.1416) < 0.001"],
    "test_setup_code": "",
}
HALF = {
    "task_id": "half",
    "prompt": 'import math\n\n\ndef half(x: float) -> float:\n    """Half of x.\n    >>> half(3.0)\n    1.5\n    """\n',
    "canonical_solution": "    return x / 2\n",
    "test": "import math\n\n\ndef check(candidate):\n    assert math.isclose(candidate(3.0), 1.5)\n    assert math.isclose(candidate(-1.0), -0.5)\n",
    "entry_point": "half",
}
EVEN = {
    "task_id": "even",
    "prompt": 'def is_even(n: int) -> bool:\n    """Whether n is even.\n    >>> is_even(4)\n    True\n    """\n',
    "canonical_solution": "    return n % 2 == 0\n",
    "test": "def check(candidate):\n    assert candidate(4)\n    assert not candidate(3)\n    assert candidate(0)\n",
    "entry_point": "is_even",
}
EVENS = {
    "task_id": "evens",
    "prompt": 'def total(xs):\n    return sum(xs)\n\n\ndef evens(n: int) -> list:\n    """The even numbers below n.\n    >>> evens(5)\n    [0, 2, 4]\n    """\n',
    "canonical_solution": "    return list(range(0, n, 2))\n",
    "test": "def check(candidate):\n    assert total(candidate(5)) == 6\n    assert total(candidate(8)) == 12\n",
    "entry_point": "evens",
}
MBPP_ROWS, HUMANEVAL_ROWS = (ADD, AREA), (HALF, EVEN, EVENS)

# Writes `lines` to every fd it can; `lines` names the forged text.
FORGE = """
def forge(lines):
    import os
    for fd in range(1, 64):
        for line in lines:
            try:
                os.write(fd, ("\\n" + line + "\\n").encode())
            except OSError:
                pass
"""
FORGED = [f'{{"id": {i}, "ok": {v}}}' for i in range(16) for v in (3, 7, 0)]  # replies of the wire format
FORGED_LINES = repr(FORGED)

# Looks for the run's nonce everywhere a program could, then forges a verdict with each candidate.
HUNT = (
    FORGE
    + """
import gc, os, re, sys
found = set()
HEX = re.compile('[0-9a-f]{32}')
def scan(values):
    found.update(v for v in values if isinstance(v, str) and HEX.fullmatch(v))
try:
    found.update(m.decode() for m in re.findall(rb'[0-9a-f]{32}', os.read(0, 1 << 20)))
    scan([sys.stdin.read()])
except Exception:
    pass
try:
    frame = sys._getframe(0)
    while frame is not None:
        scan(list(frame.f_locals.values()) + list(frame.f_globals.values()))
        frame = frame.f_back
except Exception:
    pass
try:
    for obj in gc.get_objects():
        if isinstance(obj, dict):
            scan(list(obj.values()))
        elif isinstance(obj, tuple):
            scan(obj)
except Exception:
    pass
try:
    sys.settrace(lambda frame, event, arg: scan(list(frame.f_locals.values())))
except Exception:
    pass
try:
    with open('/proc/self/maps') as maps, open('/proc/self/mem', 'rb') as mem:
        for line in maps:
            span, perms = line.split()[:2]
            if perms.startswith('rw'):
                start, end = (int(x, 16) for x in span.split('-'))
                mem.seek(start)
                found.update(m.decode() for m in re.findall(rb'[0-9a-f]{32}', mem.read(min(end - start, 1 << 24))))
except Exception:
    pass
forge(['\\x1eCORL ' + nonce + ' pass' for nonce in list(found)[:500]] + ['\\x1eCORL ' + '0' * 32 + ' pass'])
os._exit(0)
"""
)
# Rewrites the harness's comparison table wherever a class lets it reach the harness's globals.
SUBCLASSES = """
def walk(cls, seen):
    for sub in type.__subclasses__(cls):
        if sub not in seen:
            seen.add(sub)
            walk(sub, seen)
seen = set()
walk(object, seen)
for cls in seen:
    try:
        for value in list(vars(cls).values()):
            scope = getattr(value, '__globals__', None)
            if isinstance(scope, dict) and '_OPS' in scope:
                scope['_OPS']['Eq'] = lambda a, b: True
    except Exception:
        pass
class Same:
    def __eq__(self, other):
        return True
def add(a, b):
    return Same()
"""
SAME = (
    "class Same:\n    def __eq__(self, other):\n        return True\n    def __ne__(self, other):\n        return False\n"
    "    __hash__ = object.__hash__\n"
)

HOSTILE = {
    "sys.exit while loading": (ADD, "import sys\nsys.exit(0)\n\ndef add(a, b):\n    return 0"),
    "sys.exit in the call": (ADD, "def add(a, b):\n    import sys\n    sys.exit(0)"),
    "raise SystemExit": (ADD, "def add(a, b):\n    raise SystemExit"),
    "exit()": (ADD, "def add(a, b):\n    exit()"),
    "quit() while loading": (ADD, "quit()\n\ndef add(a, b):\n    return 0"),
    "os._exit in the call": (ADD, "import os\n\ndef add(a, b):\n    os._exit(0)"),
    "os._exit while loading": (ADD, "import os\nos._exit(0)\n\ndef add(a, b):\n    return 0"),
    "os._exit from a signal handler": (
        ADD,
        "import os, signal\nsignal.signal(signal.SIGALRM, lambda *a: os._exit(0))\nsignal.setitimer(signal.ITIMER_REAL, 0.3)\n\n"
        "def add(a, b):\n    import time\n    time.sleep(3)\n    return 0",
    ),
    "always-equal object": (ADD, SAME + "\ndef add(a, b):\n    return Same()"),
    "int whose __eq__ says yes": (
        ADD,
        "class Int(int):\n    def __eq__(self, other):\n        return True\n    __hash__ = int.__hash__\n\n"
        "def add(a, b):\n    return Int(0)",
    ),
    "forged lines, then os._exit": (
        ADD,
        FORGE + f"forge({FORGED_LINES})\nimport os\nos._exit(0)\n\ndef add(a, b):\n    return 0",
    ),
    "nonce hunt (stdin, frames, gc, trace, memory)": (ADD, HUNT + "\ndef add(a, b):\n    return 0"),
    "harness patched through __subclasses__": (ADD, SUBCLASSES),
    "shadowed abs": (AREA, "def abs(x):\n    return 0\n\ndef area(r):\n    return 0"),
    "patched builtins.abs": (AREA, "import builtins\nbuiltins.abs = lambda x: 0\n\ndef area(r):\n    return 0"),
    "__sub__ and __abs__ that make any tolerance pass": (
        AREA,
        "class Zero:\n    def __sub__(self, other):\n        return self\n    def __abs__(self):\n        return 0\n\n"
        "def area(r):\n    return Zero()",
    ),
    "patched math.isclose": (HALF, "    return 0.0\nimport math\nmath.isclose = lambda *a, **k: True\n"),
    "replaced sys.modules['math']": (
        HALF,
        "    return 0.0\nimport sys, types\nsys.modules['math'] = types.SimpleNamespace(isclose=lambda *a, **k: True)\n",
    ),
    "__bool__ that flips": (  # true, false, true: the three asserts' order
        EVEN,
        "    return Flip()\nFlip = type('Flip', (), {'calls': [], '__bool__': lambda self: (self.calls.append(1), len(self.calls) != 2)[1]})\n",
    ),
    "fork to try every answer": (EVEN, "    import os\n    return os.fork() == 0\n"),
    "redefined prompt helper": (EVENS, "    return [n]\ntotal = lambda xs: 6 if xs[0] == 5 else 12\n"),
}
HONEST = {
    "add": (ADD, "def add(a, b):\n    return a + b"),
    "area": (AREA, "def area(r):\n    return 3.14159 * r * r"),
    "half": (HALF, "    return x / 2\n"),
    "even": (EVEN, "    return n % 2 == 0\n"),
    "evens": (EVENS, "    return list(range(0, n, 2))\n"),
}


@pytest.fixture(scope="module")
def pool():
    with SandboxPool(workers=2) as p:
        yield p


def completion(row, code: str) -> str:
    """How the row's style hands code over: MBPP's completion ends at [DONE]; HumanEval's continues the prompt."""
    return code + "\n[DONE]" if row in MBPP_ROWS else code


def cases() -> dict[str, list[tuple[str, str, bool]]]:
    """task_id -> [(name, completion, honest)] for every row."""
    out: dict[str, list[tuple[str, str, bool]]] = {}
    for honest, table in ((True, HONEST), (False, HOSTILE)):
        for name, (row, code) in table.items():
            out.setdefault(row["task_id"], []).append((name, completion(row, code), honest))
    return out


def wrongly_graded(rows, outcomes) -> list[str]:
    """Names of the completions whose outcome is not exactly `honest` (passed iff honest)."""
    table = cases()
    return [
        name
        for row, passed in zip(rows, outcomes, strict=True)
        for (name, _, honest), ok in zip(table[row["task_id"]], passed, strict=True)
        if ok != honest
    ]


def test_hostile_completions_score_zero_in_eval(pool):
    table = cases()
    wrong = []
    for rows, style in ((MBPP_ROWS, "mbpp"), (HUMANEVAL_ROWS, "humaneval")):
        report = evaluate(rows, [[c for _, c, _ in table[r["task_id"]]] for r in rows], style, pool=pool)
        records = iter(report.records)
        wrong += wrongly_graded(rows, [[next(records).passed for _ in table[r["task_id"]]] for r in rows])
    assert wrong == []


def test_hostile_completions_score_zero_in_the_suite_grader(pool):
    table = cases()
    wrong = []
    for rows, style in ((MBPP_ROWS, "mbpp"), (HUMANEVAL_ROWS, "humaneval")):
        bench = Benchmark(name=f"hostile-{style}", title=style, data="(in memory)", grader="code", code_style=style)
        items = [Item(r["task_id"], "", "", r) for r in rows]
        verdicts = grade_code(bench, items, [[c for _, c, _ in table[r["task_id"]]] for r in rows], pool)
        wrong += wrongly_graded(rows, [v.correct for v in verdicts])
    assert wrong == []


def test_hostile_completions_earn_no_tests_reward():
    rewards = reward_spec("tests").from_gold
    table = cases()
    wrong = []
    for row in (*MBPP_ROWS, *HUMANEVAL_ROWS):
        texts = [c for _, c, _ in table[row["task_id"]]]
        wrong += wrongly_graded([row], [[bool(x) for x in rewards(texts, [row], len(texts))[0].tolist()]])
    assert wrong == []


VOTE_HOSTILE = {
    "forged lines, then os._exit": FORGE + f"forge({FORGED_LINES})\nimport os\nos._exit(0)\n\ndef add(a, b):\n    return 0",
    "forged lines from a thread after the harness": FORGE
    + f"import threading, time\nthreading.Thread(target=lambda: (time.sleep(1), forge({FORGED_LINES}))).start()\n\n"
    "def add(a, b):\n    return 0",
    "forged lines from atexit": FORGE + f"import atexit\natexit.register(forge, {FORGED_LINES})\n\ndef add(a, b):\n    return 0",
    "forged lines from __del__": FORGE
    + f"class Late:\n    def __del__(self):\n        forge({FORGED_LINES})\nkeep = Late()\n\ndef add(a, b):\n    return 0",
    "__repr__ of the honest value": "class Liar:\n    def __init__(self, shown):\n        self.shown = shown\n"
    "    def __repr__(self):\n        return repr(self.shown)\n\ndef add(a, b):\n    return Liar(a + b)",
    "os._exit on the second input": "def add(a, b):\n    if a == 2:\n        import os\n        os._exit(0)\n    return a + b",
    "sys.exit in the call": "def add(a, b):\n    import sys\n    sys.exit(0)",
}


def test_hostile_programs_never_take_the_honest_behaviour_key():
    answers_of = task_spec("code").answers
    problem = prepare_row(ADD)
    texts = [completion(ADD, HONEST["add"][1])] * 2 + [completion(ADD, code) for code in VOTE_HOSTILE.values()]
    _, keys = answers_of(texts, [problem], len(texts))
    honest, hostile = keys[0][0], dict(zip(VOTE_HOSTILE, keys[0][2:]))
    assert json.loads(honest)[-3:] == [["ok", "3"], ["ok", "7"], ["ok", "0"]]  # after the mutated inputs, the shown ones
    assert [name for name, key in hostile.items() if key == honest] == []
    assert list(keys[0]).count(honest) == 2  # the two honest programs and no hostile one


def test_equal_values_share_one_behaviour_key():
    answers_of = task_spec("code").answers
    problem = prepare_row({**ADD, "test_list": ["assert add(8, 0) == {0, 8}"]})
    pairs = {
        "set": ("def add(a, b):\n    return {a, b}", "def add(a, b):\n    return {b, a}"),  # repr {8, 0} vs {0, 8}
        "dict": ("def add(a, b):\n    return {a: 1, b: 2}", "def add(a, b):\n    return {b: 2, a: 1}"),
        "-0.0": ("def add(a, b):\n    return 0.0 * a", "def add(a, b):\n    return -0.0 * a"),
    }
    texts = [completion(ADD, code) for pair in pairs.values() for code in pair]
    _, keys = answers_of(texts, [problem], len(texts))
    assert [name for i, name in enumerate(pairs) if keys[0][2 * i] != keys[0][2 * i + 1]] == []
