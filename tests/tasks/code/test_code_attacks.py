"""Attacks on the code judge itself (issue 40), each ending in the exact status it must, on every backend that works here.

The program runs sandboxed; the hidden tests run in the judge, another process
(corl.tasks.code.judge). Before that design (main at 2f21024) the tests ran inside the
program's process guarded by a nonce and a pass token, and these programs passed there:
they read the secrets from gc.garbage's frames or from the heap through ctypes and printed
the pass line (or the vote's lines with the honest values) before exiting. Each test below
fails there; the exact statuses are those of corl.tasks.code.judge's docstring.
"""

from __future__ import annotations

import json
import os
import resource

import pytest

from corl.sandbox import SandboxPool, detect
from corl.tasks.code.execute import code_answers, run_tests
from corl.tasks.code.values import Record, canonical_text
from corl.tasks.code.wire import WireError, decode

ADD = {
    "task_id": "add",
    "text": "Write a function to add two numbers.",
    "code": "def add(a, b):\n    return a + b",
    "test_list": ["assert add(1, 2) == 3", "assert add(2, 5) == 7", "assert add(-1, 1) == 0"],
    "test_setup_code": "",
}
HONEST = "def add(a, b):\n    return a + b\n"
CALLS = ["add(1, 2)", "add(2, 5)", "add(-1, 1)"]

# Every secret the program's process holds, found through frames left in gc.garbage (no audited call).
GC_FRAMES = """
import gc, os
def _frames_locals():
    gc.set_debug(gc.DEBUG_SAVEALL)
    def inner():
        try:
            raise ValueError()
        except ValueError as err:
            keep = err
        return keep
    e = inner()
    del e
    gc.collect()
    found = []
    for obj in list(gc.garbage):
        if type(obj).__name__ == "frame":
            f = obj
            while f is not None:
                try:
                    found.append(dict(f.f_locals))
                except Exception:
                    pass
                f = f.f_back
    gc.set_debug(0)
    return found
def _to_every_fd(text):
    for fd in range(1, 64):
        try:
            os.write(fd, text.encode())
        except OSError:
            pass
"""
# The old pass line, printed to every fd with the stolen nonce and token, then an exit before the tests end.
STEAL_VERDICT = """
def add(a, b):
    for scope in _frames_locals():
        if isinstance(scope.get("nonce"), str) and isinstance(scope.get("token"), str):
            _to_every_fd("\\n\\x1eCORL " + scope["nonce"] + " pass " + scope["token"] + "\\n")
            os._exit(0)
    return 0
"""
# Memory read through a ctypes.Union of a pointer, page by page (a fault is EFAULT from write(2), not a crash):
# every live str of 32 hex digits (the old harness's nonce and pass token), found by its header.
CTYPES_HEAP = """
import ctypes, os, re, struct, sys
def _hex_strings():
    PAGE = 4096
    class U(ctypes.Union):
        _fields_ = [("addr", ctypes.c_void_p), ("ptr", ctypes.POINTER(ctypes.c_char * PAGE))]
    r, w = os.pipe()
    header = re.compile(re.escape(struct.pack("<Qq", id(str), 32)) + b".{%d}([0-9a-f]{32})\\x00" % (sys.getsizeof("") - 25), re.S)
    found = set()
    for anchor in (id("a" * 40), id(os.__doc__)):
        page = anchor - anchor % PAGE - (128 << 20)
        text = b""
        while page < anchor + (128 << 20):
            u = U()
            u.addr = page
            page += PAGE
            try:
                os.write(w, u.ptr.contents)
            except OSError:  # unmapped: skip ahead 64 KiB
                text, page = b"", page + 15 * PAGE
                continue
            text = text[-100:] + os.read(r, PAGE)
            found.update(m.group(1).decode() for m in header.finditer(text))
    return sorted(found)
def add(a, b):
    found = _hex_strings()
    lines = "".join("\\n\\x1eCORL %s pass %s\\n" % (x, y) for x in found for y in found if x != y)
    for fd in range(1, 64):
        try:
            os.write(fd, lines.encode())
        except OSError:
            pass
    if lines:
        os._exit(0)
    return 0
"""
# Reply lines of the current wire format, for every request id a judge could count, on every fd.
FORGED_REPLIES = """
def add(a, b):
    _to_every_fd("".join('{"id":%d,"ok":%d}\\n' % (i, v) for i in range(64) for v in (3, 7, 0)))
    return 0
"""
# The vote: the old harness's value lines with the stolen nonce and the honest values, then an exit;
# and the current format's replies on every fd.
FORGED_KEY = """
def add(a, b):
    for scope in _frames_locals():
        if isinstance(scope.get("nonce"), str) and isinstance(scope.get("out"), int):
            lines = "".join("\\n\\x1eCORL %s %d ok %s\\n" % (scope["nonce"], i, v) for i, v in enumerate((3, 7, 0)))
            os.write(scope["out"], (lines + "\\n\\x1eCORL " + scope["nonce"] + " end\\n").encode())
            os._exit(0)
    _to_every_fd("".join('{"id":%d,"ok":%d}\\n' % (i, v) for i in range(64) for v in (3, 7, 0)))
    return a + b
"""
# The old pass line printed (print, on stdout pointed at the harness's output fd when one is found), no exit.
PRINT_OLD_PASS_LINE = """
def add(a, b):
    import sys
    for scope in _frames_locals():
        if isinstance(scope.get("nonce"), str) and isinstance(scope.get("token"), str):
            sys.stdout = open(scope["out"], "w", closefd=False)
            print("\\n\\x1eCORL " + scope["nonce"] + " pass " + scope["token"], flush=True)
            os._exit(0)
    print("\\x1eCORL " + "0" * 32 + " pass " + "0" * 32, flush=True)
    return 0
"""
# Replies written straight on the stub's reply fd (found in its frame): past the size bound, nested past any parser.
RAW_REPLY = """
import sys
def add(a, b):
    stub = sys._getframe(1).f_locals  # the stub's frame that called add: its reply fd and the request id
    os.write(stub["self"].replies, PAYLOAD)
    return a + b
"""
OVERSIZED = RAW_REPLY.replace("PAYLOAD", 'b"x" * (9 << 20)')
NESTED = RAW_REPLY.replace("PAYLOAD", '(\'{"id": %d, "ok": \' % stub["rid"] + "[" * 100000 + "]" * 100000 + "}\\n").encode()')
# A set of big ints that all share hash 0 (k * (2**61 - 1)): quadratic to build in the judge (hash flooding).
FLOOD = RAW_REPLY.replace(
    "PAYLOAD",
    '(\'{"id": %d, "ok": {"s": [\' % stub["rid"] + ",".join(\'{"i": "%s"}\' % hex(k * (2**61 - 1)) for k in range(1, 2000))'
    ' + "]}}\\n").encode()',
)
# A record forged into the bootstrap's record pipe (an fd of the program's process): status and text of its choice.
FORGED_RECORD = """
import os
def add(a, b):
    for fd in range(5, 20):
        try:
            os.write(fd, b'{"kind": "MemoryError", "message": "\\\\ud800 forged\\\\n", "errno": null}\\n')
        except OSError:
            pass
    os._exit(1)
"""
ATTACKS = {  # name: (program, status, error it must end with)
    "gc.garbage frames, the pass line, an exit": (GC_FRAMES + STEAL_VERDICT, "error", "AssertionError"),
    "ctypes heap read, the pass line, an exit": (CTYPES_HEAP, "error", "AssertionError"),
    "forged replies of the current format": (GC_FRAMES + FORGED_REPLIES, "malformed", "a reply to another request"),
    "the old pass line printed": (GC_FRAMES + PRINT_OLD_PASS_LINE, "error", "AssertionError"),
    "os._exit in the call": (GC_FRAMES + STEAL_VERDICT.replace("return 0", "os._exit(0)"), "exit", None),
    "os._exit while loading": ("import os\nos._exit(0)\n" + HONEST, "exit", None),
    "sys.exit(0) in the call": ("def add(a, b):\n    import sys\n    sys.exit(0)\n", "error", "SystemExit: 0"),
    "sys.exit(0) while loading": ("import sys\nsys.exit(0)\n" + HONEST, "error", "SystemExit: 0"),
    "a killed process": ("def add(a, b):\n    import os, signal\n    os.kill(os.getpid(), signal.SIGKILL)\n", "killed", None),
    "a fork that answers twice": ("def add(a, b):\n    import os\n    os.fork()\n    return a + b\n", "malformed", None),
    "a value with no plain form": ("def add(a, b):\n    return lambda: a + b\n", "error", "WireError"),
    "a value past the size bound": ("def add(a, b):\n    return 'x' * (9 << 20)\n", "error", "WireError: reply not encodable"),
    "a raw reply past the size bound": ("import os\n" + OVERSIZED, "malformed", "malformed reply: a reply over 8388608 bytes"),
    "a raw reply nested past the parser": ("import os\n" + NESTED, "malformed", "malformed reply: not a JSON line"),
    "a raw reply of colliding hashes": (
        "import os\n" + FLOOD,
        "malformed",
        "malformed value from add: a set or dict with over 256 colliding",
    ),
    "a forged sandbox record": (FORGED_RECORD, "exit", "the program ended before its tests did"),  # was "memory"
    # Decoding took several frames a level: a RecursionError out of the proxy, which tests catching Exception passed.
    "frozensets nested past the judge's stack": (
        "def add(a, b):\n    v = frozenset()\n    for _ in range(199):\n        v = frozenset([v])\n    return v\n",
        "malformed",
        "malformed value from add: a value nested too deeply for this interpreter's stack",
    ),
}


def _backend(name: str):
    """Every walled backend is a case: one that does not work here shows as a skip line with the reason."""
    try:
        works, why = detect(name).walls, "no walls"
    except Exception as e:  # noqa: BLE001 - a backend that does not work on this host is skipped, by name
        works, why = False, str(e)
    return pytest.param(name, marks=pytest.mark.skipif(not works, reason=f"{name}: {why}"))


@pytest.fixture(scope="module", params=[_backend("unshare"), _backend("bwrap")])
def pool(request):
    with SandboxPool(workers=2, backend=request.param) as p:
        yield p


def test_attacks_on_the_judge_end_in_their_exact_status(pool):
    runs = run_tests([code for code, _, _ in ATTACKS.values()] + [HONEST], [ADD] * (len(ATTACKS) + 1), pool)
    assert (runs[-1].passed, runs[-1].status) == (True, "ok")  # an honest program beside them passes
    wrong = {}
    for (name, (_, status, error)), run in zip(ATTACKS.items(), runs):
        if run.passed or run.status != status or (error is not None and not (run.error or "").startswith(error)):
            wrong[name] = (run.passed, run.status, run.error)
        elif run.error is not None and not (run.error.isprintable() and run.error.encode("utf-8")):
            wrong[name] = ("not clean", run.error)  # a lone surrogate here crashed `corl grade --records`
    assert wrong == {}


def test_a_reported_stop_iteration_cannot_end_the_tests_iteration_early(pool):
    """Tests written with map()/filter() end quietly when a call raises StopIteration in the judge:
    all(map(...)) is then all([]), True. The program's StopIteration must arrive as a plain error."""
    mapped = {
        **ADD,
        "test_list": [
            "assert all(map(lambda x: add(x, 1) == x + 1, [1, 2, 3]))",
            "assert not list(filter(lambda x: add(x, 0) != x, [4, 5]))",
        ],
    }
    stop = "def add(a, b):\n    raise StopIteration\n"
    runs = run_tests([stop, stop.replace("StopIteration", "StopAsyncIteration"), HONEST], [mapped] * 3, pool)
    assert [(r.passed, r.status, r.error) for r in runs] == [
        (False, "error", "StopIteration"),  # ended the map early before: passed, status ok
        (False, "error", "StopAsyncIteration"),
        (True, "ok", None),
    ]


def test_forged_vote_lines_never_take_the_honest_key(pool):
    problem = {**ADD, "public_inputs": CALLS}
    texts = [HONEST, GC_FRAMES + FORGED_KEY, GC_FRAMES + STEAL_VERDICT]
    _, keys = code_answers(texts, problem, pool, all_errors_count=True)
    assert json.loads(keys[0]) == [["ok", "3"], ["ok", "7"], ["ok", "0"]]
    assert json.loads(keys[1]) == [["err", "Malformed"]] * 3  # the judge read a forged line as the first reply
    assert json.loads(keys[2]) == [["ok", "0"]] * 3  # it found no secret: its own (wrong) behaviour


def test_objects_cross_as_plain_structure_both_ways(pool):
    """MBPP 367's shape: the setup builds a tree of the solution's class; a class only the tests define crosses too."""
    tree = {
        "task_id": "tree",
        "text": "Depth of a tree.",
        "code": "",
        "test_setup_code": "root = Node(1)\nroot.left = Node(2)\nroot.left.left = Node(3)\n"
        "class Box:\n    def __init__(self, v):\n        self.v = v\n",
        "test_list": [
            "assert depth(root) == 3",
            "assert depth(Node(7)) == 1",
            "assert unbox(Box(4)) == 4",
            "assert grow(2).v == 2",
        ],
    }
    solution = (
        "class Node:\n    def __init__(self, data):\n        self.data, self.left, self.right = data, None, None\n"
        "def depth(n):\n    return 0 if n is None else 1 + max(depth(n.left), depth(n.right))\n"
        "def unbox(b):\n    return b.v\n"
        "class Box:\n    def __init__(self, v):\n        self.v = v\n"
        "def grow(v):\n    return Box(v)\n"
    )
    stdlib_value = solution + "import decimal\ndef depth(n):\n    return decimal.Decimal(3)\n"
    runs = run_tests([solution, stdlib_value], [tree, tree], pool)
    assert (runs[0].passed, runs[0].status) == (True, "ok")
    assert (runs[1].passed, runs[1].status, runs[1].error) == (
        False,
        "error",
        "WireError: no plain form for a value of type Decimal",
    )


def test_a_host_holding_over_1024_fds_still_judges(pool):
    """A trainer holds many fds (dataloaders, sockets, NCCL): the judge got pipe fds past select()'s FD_SETSIZE
    and every program, the honest one included, ended "error" (ValueError: filedescriptor out of range in select())."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1300:
        pytest.skip(f"RLIMIT_NOFILE hard limit {hard}: cannot hold 1,100 fds")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1300) if hard == resource.RLIM_INFINITY else hard, hard))
    held = []
    try:
        held = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
        run = run_tests([HONEST], [ADD], pool)[0]
        _, keys = code_answers([HONEST], {**ADD, "public_inputs": CALLS}, pool)
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert (run.passed, run.status) == (True, "ok")
    assert json.loads(keys[0]) == [["ok", "3"], ["ok", "7"], ["ok", "0"]]


def test_record_class_names_cannot_forge_or_break_a_key():
    """A class name was written raw: [<A {}>, <B {}>] was also the key of one record named 'A {}>, <B'; a lone
    surrogate or newline in a name went into the key as is (not encodable as UTF-8)."""
    two, one = [Record("A", {}), Record("B", {})], [Record("A {}>, <B", {})]
    assert canonical_text(two) == "[<A {}>, <B {}>]"
    assert canonical_text(one) != canonical_text(two)
    assert canonical_text([Record("Node", {"v": 1}), Record("m.Tree", {})]) == "[<Node {'v': 1}>, <m.Tree {}>]"
    odd = canonical_text(Record("\ud800\n]]INJECT", {}))
    assert odd.isascii() and odd.isprintable() and "\n" not in odd


def test_decoding_a_hash_flood_is_refused_and_cheap():
    """180k big ints k*(2**61-1) in one set cost the judge 20-36 s of CPU; a set or dict that floods one bucket is refused."""
    flood = {"s": [{"i": hex(k * (2**61 - 1))} for k in range(1, 20000)]}
    with pytest.raises(WireError, match="colliding"):
        decode(flood, Record)
    with pytest.raises(WireError, match="colliding"):
        decode({"d": [[{"i": hex(k * (2**61 - 1))}, 0] for k in range(1, 20000)]}, Record)
    assert decode({"s": [{"i": hex(k * (2**61 - 1))} for k in range(1, 200)]}, Record) == {k * (2**61 - 1) for k in range(1, 200)}
    assert decode({"s": list(range(100000))}, Record) == set(range(100000))  # big honest sets still cross


REVERSE = {
    "task_id": "rev",
    "text": "Write a function to reverse the words of a sentence.",
    "code": "def reverse_words(s):\n    return ' '.join(reversed(s.split()))",
    "test_list": [
        "assert reverse_words('python program') == 'program python'",
        "assert reverse_words('java language') == 'language java'",
        "assert reverse_words('indian man') == 'man indian'",
    ],
    "test_setup_code": "",
}


def _lookup_table(row: dict) -> str:
    """What a policy learns on MBPP's plain reward: the prompt's three asserts as a table (redteam F1)."""
    name = row["code"].split("(")[0].removeprefix("def ")
    pairs = [t.removeprefix("assert " + name).split(" == ") for t in row["test_list"][:3]]
    table = ", ".join(f"repr({args.removesuffix(',)') if args.endswith(',)') else args}): {value}" for args, value in pairs)
    return f"```python\ndef {name}(*args):\n    return {{{table}}}.get(repr(args if len(args) > 1 else args[0]))\n```"


def test_mbpp_lookup_table_of_the_shown_asserts_earns_no_tests_reward():
    """MBPP's prompt shows test_list[:3], the hidden tests were that same list: the table passed 30/30 rows.
    The `tests` reward adds calls the prompt does not show, answered by the reference code (corl.tasks.code.plus)."""
    from corl.tasks.code.task import passes_hidden_tests

    rows = [ADD, REVERSE]
    tables = [_lookup_table(r) for r in rows]
    references = ["```python\n" + r["code"] + "\n```" for r in rows]
    assert passes_hidden_tests(tables, rows, 1, plus=False) == [[True], [True]]  # the plain tests: fooled
    assert passes_hidden_tests(tables + references, rows * 2, 1) == [[False], [False], [True], [True]]


CATCHING = {**ADD, "test_list": ["try:\n    assert add(1, 2) == 3\nexcept Exception:\n    pass"]}


def test_a_reported_memory_error_fails_the_run_even_where_the_tests_catch_exception(pool):
    """As an ordinary MemoryError (an Exception) the tests' `except Exception` swallowed it: a pass."""
    runs = run_tests(["def add(a, b):\n    raise MemoryError('no room')\n", HONEST], [CATCHING] * 2, pool)
    assert [(r.passed, r.status, r.error) for r in runs] == [(False, "memory", "MemoryError: no room"), (True, "ok", None)]


def test_the_judges_own_deadline_is_a_timeout_and_leaves_no_vote_answer(pool):
    """A program deaf to the stub's alarm stops answering on its second input: the judge's deadline passes. Its
    outcome reads TimeoutError from there (not Malformed, a kind two programs could share by writing one bad line),
    and a key holding a timeout is no answer, even where all errors count."""
    from corl.tasks.code import stub
    from corl.tasks.code.execute import behaviour_job, behaviour_key, behaviour_limits, judge

    deaf = "import signal\ndef add(a, b):\n    signal.signal(signal.SIGALRM, signal.SIG_IGN)\n    while a == 3:\n        pass\n    return a + b\n"
    calls = ["add(1, 2)", "add(3, 4)", "add(5, 6)"]
    verdict, _ = judge(stub.program(deaf), behaviour_job(calls, ADD), behaviour_limits(3), pool)
    assert verdict["outcome"] == [["ok", "3"], ["err", "TimeoutError"], ["err", "TimeoutError"]]
    assert behaviour_key(verdict, 3, all_errors_count=True) is None
    # The host's own guard on the judge process: a timeout too, never the key of a judge that gave no verdict.
    assert behaviour_key({"status": "timeout", "error": "the judge ran past its deadline"}, 2, all_errors_count=True) is None
    assert json.loads(behaviour_key({"status": "judge"}, 2, all_errors_count=True)) == [["err", "Judge"]] * 2


def test_a_module_the_tests_read_without_importing_it_is_the_judges_own(pool):
    """MBPP 596 asserts `tuple_size(t) == sys.getsizeof(t)` with no `import sys`: MBPP's harness found `sys` in the
    solution's namespace; here `sys` became a proxy of the program and the reference solution failed."""
    from corl.tasks.code.execute import module_names, program_names

    row = {
        "task_id": 596,
        "text": "Write a function to find the size of the given tuple.",
        "code": "import sys\ndef tuple_size(t):\n    return sys.getsizeof(t)",
        "test_list": ['assert tuple_size(("A", 1, "B", 2)) == sys.getsizeof(("A", 1, "B", 2))'],
        "test_setup_code": "",
    }
    assert (program_names(row["test_list"][0]), module_names(row["test_list"][0])) == (["tuple_size"], ["sys"])
    runs = run_tests([row["code"] + "\n", "def tuple_size(t):\n    return 0\n"], [row, row], pool)
    assert [(r.passed, r.status) for r in runs] == [(True, "ok"), (False, "error")]
