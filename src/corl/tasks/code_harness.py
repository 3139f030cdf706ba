"""The program the sandbox runs for code: a completion's solution, then its hidden tests or its public calls.

Shipped as source (`program()`), with `corl.tasks.code_values` loaded into the same private
namespace first. The job comes on stdin as JSON (`corl.tasks.code_exec` writes it): the
solution, the entry point, HumanEval's prompt, MBPP's setup, the tests or the calls, the
time limits, a random per-run nonce and, for tests, a second random token that only a pass
reveals. Output is one line per result on the process's original stdout: "\\x1eCORL <nonce>
pass <token>" / "... fail <Kind>: <message>" after the hidden tests, "... <i> ok <canonical
text>" / "... <i> err <Kind>" per public call, then "... end".

Before any of the program's code runs the harness has read the job, pointed fds 0, 1, 2 at
/dev/null (the program cannot read the nonce from stdin nor write into the harness's
stdout, which lives on a private fd), compiled everything it will run, taken its own copy
of the builtins and a copy of every loaded module (`PRELOAD` first), and installed an audit
hook. What the host can then rely on:

- Exits of every kind: the verdict "pass" is printed only after the last test returned;
  SystemExit, KeyboardInterrupt and every other BaseException are failures, and an
  `os._exit`, a signal or a crash leaves no verdict, which the host counts as a failure.
  The harness ends itself with the `os._exit` it saved, so atexit handlers, `__del__` and
  threads left running never speak after it.
- Forged lines: only lines carrying this run's nonce count, and the program cannot read it
  from its stdin, its source file or any namespace it can name; a pass also needs the pass
  token, which is never written unless the tests passed (a program that captured the
  harness's own output learns nothing that would forge one). Processes cannot be forked,
  so one run has one verdict.
- Lying values: every call in the tests returns what `code_values.plain_result` makes of
  its value (an object's own `__eq__`, `__sub__`, `__abs__`, `__bool__` or `__class__`
  never reaches the test), and the tests' comparisons (==, <, in, chains) and truth tests
  (assert, if, not, and/or) go through `code_values`, which never runs a value's own
  methods; the behaviour key is `code_values.canonical_text`.
- Rebound names: the tests run in their own namespace with the harness's copy of the
  builtins and of the modules (`math.isclose = ...` or `builtins.abs = ...` in the
  solution change nothing they see); HumanEval's prompt helpers are run again there from
  the prompt, not taken from the solution; MBPP's tests see only the solution names they
  use. `sys.settrace`/`setprofile` (which could jump over asserts), frame access
  (`sys._getframe`, the frames of tracebacks, generators and coroutines), gc's object
  graph, ctypes and CPython's _test* modules, new audit hooks, replacing a function's `__code__` and setting attributes
  of the library's classes, forking, spawning processes and opening /proc or a file named
  mem raise inside the program. The tests run in a thread of their own: the main thread,
  where Python runs signal handlers (which receive the interrupted frame), then holds no
  harness frame.

What it does not guarantee: the public calls run in the main thread (their time limits are
SIGALRM), so a program whose signal handler walks the frames can rewrite its own behaviour
lines (no more than returning those values would); a solution can still patch the
internals of pure-Python library modules the tests call (`copy`, `random`: their module
globals, not the attributes the tests see); a test that hands the solution a function or
an object of its own (none in HumanEval or MBPP) opens the tests' namespace to it; a test
that reuses an argument the solution mutated sees the mutation. The sandbox's walls, not
this harness, keep any program away from the host.
"""

from __future__ import annotations

import _thread
import ast
import builtins
import gc
import json
import os
import signal
import sys
import types

if __name__ == "corl_harness":  # in the sandbox: code_values' source runs first, into this namespace
    exec(compile(__corl_values_source__, "corl_code_values.py", "exec", dont_inherit=True), globals())  # noqa: F821
else:  # on the host (imported for tests and for its source)
    from corl.tasks.code_values import canonical_text, class_name, compare, compare_chain, guarded_call, truth

MARK = "\x1eCORL "
PRELOAD = ("math", "cmath", "typing", "copy", "random", "string", "collections", "re", "itertools", "functools", "heapq")
PRELOAD += ("operator", "bisect", "array", "datetime", "decimal", "enum", "statistics", "fractions")
COMPARE, CHAIN, TRUTH, CALL = "__corl_compare__", "__corl_chain__", "__corl_truth__", "__corl_call__"

# Taken when the harness loads, before the program runs: the program may rebind the originals.
_read, _write, _dup, _dup2, _open, _close, _exit = os.read, os.write, os.dup, os.dup2, os.open, os.close, os._exit
_set_handler, _set_timer, _SIGALRM, _ITIMER_REAL = signal.signal, signal.setitimer, signal.SIGALRM, signal.ITIMER_REAL
_add_hook, _Module, _real_import, _start_thread = (
    sys.addaudithook,
    types.ModuleType,
    builtins.__import__,
    _thread.start_new_thread,
)
_BUILTINS = dict(vars(builtins))
_FRAME_EVENTS = frozenset({"sys._getframe", "sys._getframemodulename"})
_FRAME_ATTRS = frozenset({"tb_frame", "gi_frame", "cr_frame", "ag_frame"})
_CLOSED_EVENTS = frozenset(
    {"sys.settrace", "sys.setprofile", "sys._current_frames", "sys._current_exceptions", "sys.addaudithook"}
    | {"gc.get_objects", "gc.get_referrers", "gc.get_referents", "os.symlink", "os.link"}
    | {"subprocess.Popen", "os.exec", "os.posix_spawn", "os.spawn", "os.system", "os.startfile", "os.fork", "os.forkpty"}
)

_CLOSED_MODULES = frozenset({"_ctypes", "ctypes", "_xxsubinterpreters", "_xxinterpchannels"})  # and CPython's _test* modules


def read_job() -> dict:
    chunks = []
    while chunk := _read(0, 1 << 20):
        chunks.append(chunk)
    return json.loads(b"".join(chunks))


def private_stdout() -> int:
    """A private copy of fd 1 for the harness; fds 0, 1 and 2 then point at /dev/null."""
    out = _dup(1)
    null = _open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        _dup2(null, fd)
    _close(null)
    return out


def emit(out: int, nonce: str, payload: str) -> None:
    """One result line; the leading newline ends whatever the program left unterminated there."""
    data = ("\n" + MARK + nonce + " " + payload + "\n").encode("utf-8", "backslashreplace")
    while data:
        data = data[_write(out, data) :]


def _no_args() -> ast.arguments:
    return ast.arguments(posonlyargs=[], args=[], vararg=None, kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[])


def _call(name: str, args: list) -> ast.Call:
    return ast.Call(func=ast.Name(name, ast.Load()), args=args, keywords=[])


def _truth_of(node: ast.expr) -> ast.expr:
    """In a truth context `a and b` is as true as truth(a) and truth(b)."""
    if isinstance(node, ast.BoolOp):
        return ast.copy_location(ast.BoolOp(node.op, [_truth_of(v) for v in node.values]), node)
    return ast.copy_location(_call(TRUTH, [node]), node)


def _guard():
    """A fresh AST transformer (module docstring's lying values); made per use and dropped before the
    program runs: a class the harness kept would list its methods, and their globals, to
    `object.__subclasses__()`."""

    class _Guard(ast.NodeTransformer):
        """Routes the tests' comparisons and truth tests through code_values (module docstring)."""

        def visit_Compare(self, node: ast.Compare) -> ast.AST:
            self.generic_visit(node)
            ops = [type(op).__name__ for op in node.ops]
            if len(ops) == 1:
                call = _call(COMPARE, [ast.Constant(ops[0]), node.left, node.comparators[0]])
            else:  # thunks keep Python's order of evaluation and its short-circuit
                thunks = [ast.Lambda(args=_no_args(), body=e) for e in (node.left, *node.comparators)]
                call = _call(CHAIN, [ast.Tuple([ast.Constant(op) for op in ops], ast.Load()), *thunks])
            return ast.copy_location(call, node)

        def visit_Call(self, node: ast.Call) -> ast.AST:
            self.generic_visit(node)
            if isinstance(node.func, ast.Name) and node.func.id == "super":  # zero-argument super() reads its caller
                return node
            return ast.copy_location(ast.Call(ast.Name(CALL, ast.Load()), [node.func, *node.args], node.keywords), node)

        def _tested(self, node):
            self.generic_visit(node)
            node.test = _truth_of(node.test)
            return node

        visit_Assert = visit_If = visit_While = visit_IfExp = _tested

        def visit_UnaryOp(self, node: ast.UnaryOp) -> ast.AST:
            self.generic_visit(node)
            if isinstance(node.op, ast.Not):
                node.operand = _truth_of(node.operand)
            return node

        def visit_comprehension(self, node: ast.comprehension) -> ast.AST:
            self.generic_visit(node)
            node.ifs = [_truth_of(test) for test in node.ifs]
            return node

    return _Guard()


def _compile(source: str | None, name: str, guard: bool = False, mode: str = "exec"):
    if not source:
        return None
    tree = ast.parse(source, name, mode)
    if guard:
        tree = ast.fix_missing_locations(_guard().visit(tree))
    return compile(tree, name, mode, dont_inherit=True, optimize=0)


def plan_of(job: dict) -> dict:
    """Every code object the run needs, compiled while nothing of the program has run yet."""
    checks = (job.get("setup") or "") + "\n" + (job.get("tests") or "") + "\n" + "\n".join(job.get("calls") or ())
    return {
        "solution": _compile(job["solution"], "solution.py") or _compile("pass", "solution.py"),
        "prompt": _compile(job.get("prompt"), "prompt.py"),
        "setup": _compile(job.get("setup"), "setup.py", guard=True),
        "tests": _compile(job.get("tests"), "tests.py", guard=True),
        "calls": [_compile(c, f"call{i}.py", mode="eval") for i, c in enumerate(job.get("calls") or ())],
        "entry": job["entry_point"],
        "names": frozenset(n.id for n in ast.walk(ast.parse(checks)) if isinstance(n, ast.Name)) - set(_BUILTINS),
    }


def module_copies() -> dict:
    """A copy of every loaded module (PRELOAD first): the tests import these, whatever the program patches."""
    for name in PRELOAD:
        try:  # noqa: SIM105 (the harness avoids contextlib: a module the program can patch)
            _real_import(name)
        except ImportError:
            pass
    copies = {}
    for name, module in list(sys.modules.items()):
        if type(module) is _Module:
            copy = _Module(name)
            copy.__dict__.update(module.__dict__)
            copies[name] = copy
    return copies


def importer(copies: dict):
    """The tests' __import__: the module copies where they exist, the interpreter's import otherwise."""

    def _import(name, globals=None, locals=None, fromlist=(), level=0):
        if level == 0 and name in copies:
            return copies[name] if fromlist else copies[name.partition(".")[0]]
        return _real_import(name, globals, locals, fromlist, level)

    return _import


def arm(copies: dict) -> None:
    """The audit hook of the module docstring; from here on the program's code may run."""
    library = frozenset(id(v) for m in copies.values() for v in m.__dict__.values() if issubclass(type(v), type))

    def hook(event, args):
        if event in _FRAME_EVENTS or (event == "object.__getattr__" and args[1] in _FRAME_ATTRS):
            raise ValueError(f"{event}: frames are closed to the program under test")  # what stdlib callers expect
        if event in _CLOSED_EVENTS or event.startswith("ctypes.") or event.startswith("sys.monitoring"):
            raise RuntimeError(f"{event} is closed to the program under test")
        if event in ("object.__setattr__", "object.__delattr__") and (args[1] == "__code__" or id(args[0]) in library):
            raise RuntimeError(f"{event} {args[1]}: the library's classes and code objects are closed to the program")
        if event == "import" and (args[0].startswith("_test") or args[0] in _CLOSED_MODULES):
            raise ImportError(f"module {args[0]} is closed to the program under test")
        if event == "open" and _closed_path(args[0]):
            raise PermissionError(f"open {args[0]!r}: /proc and memory files are closed to the program under test")

    _add_hook(hook)


def _closed_path(path) -> bool:
    """/proc and any file named mem (the process's memory); a path object other than str/bytes/fd
    counts as closed, since its __fspath__ could answer the check and the open differently."""
    if type(path) is int:
        return False
    if type(path) is bytes:
        path = path.decode("utf-8", "replace")
    if type(path) is not str:
        return True
    parts = path.split("/")
    return "proc" in parts or "mem" in parts


def describe(e: BaseException, with_message: bool = True) -> str:
    """'Kind: message' of an exception, on one line, without trusting the exception's own class."""
    kind = class_name(type(e)).rpartition(".")[2]
    if not with_message:
        return kind
    try:
        message = str.__str__(BaseException.__str__(e))
    except BaseException:  # its args' __str__ is the program's code
        message = ""
    message = "".join(c if c.isprintable() else " " for c in message[:300])
    return kind + ": " + message if message else kind


def environment(plan: dict, solution: dict, copies: dict, checks_builtins: dict) -> dict:
    """The namespace the tests (or calls) run in: see the module docstring."""
    if plan["entry"] not in solution:
        raise NameError(f"the solution does not define {plan['entry']}")
    entry = solution[plan["entry"]]
    env = {"__name__": "__corl_tests__", "__builtins__": checks_builtins, COMPARE: compare, CHAIN: compare_chain, TRUTH: truth}
    env[CALL] = guarded_call(entry)
    if plan["prompt"] is not None:
        exec(plan["prompt"], env)
    else:
        for name in plan["names"]:
            if name in copies:
                env[name] = copies[name]
            elif name in solution:
                env[name] = solution[name]
    env[plan["entry"]] = entry
    if plan["setup"] is not None:
        exec(plan["setup"], env)
    return env


def run_tests(plan: dict, copies: dict, checks_builtins: dict) -> str:
    """'pass' when the solution and every test ran to their end, else 'fail Kind: message'."""
    try:
        solution = {"__name__": "solution", "__builtins__": builtins}
        exec(plan["solution"], solution)
        exec(plan["tests"], environment(plan, solution, copies, checks_builtins))
    except BaseException as e:  # SystemExit, KeyboardInterrupt and GeneratorExit too: only the end passes
        return "fail " + describe(e)
    return "pass"


def timer():
    """An alarm raising TimeoutError while armed; its function's globals hold nothing but its flag."""
    scope = {"__builtins__": {"TimeoutError": TimeoutError}, "ARMED": [False]}
    exec("def alarm(signum, frame):\n    if ARMED[0]:\n        raise TimeoutError('time limit')\n", scope)
    return scope["alarm"], scope["ARMED"]


def timed(thunk, seconds: float, alarm, armed: list) -> str:
    """'ok <text>' or 'err <Kind>' of one step under its own time limit."""
    try:
        _set_handler(_SIGALRM, alarm)
        armed[0] = True
        _set_timer(_ITIMER_REAL, seconds)
        try:
            return "ok " + thunk()
        finally:
            _set_timer(_ITIMER_REAL, 0)
            armed[0] = False
    except BaseException as e:
        return "err " + describe(e, with_message=False)


def run_calls(plan: dict, job: dict, copies: dict, checks_builtins: dict, out: int, nonce: str) -> None:
    """One line per public call: its value's canonical text or its error kind; -1 when loading failed."""
    alarm, armed = timer()
    solution = {"__name__": "solution", "__builtins__": builtins}
    env = []

    def load() -> str:
        exec(plan["solution"], solution)
        env.append(environment(plan, solution, copies, checks_builtins))
        return ""

    loaded = timed(load, job["load_s"], alarm, armed)
    if not loaded.startswith("ok"):
        emit(out, nonce, "-1 " + loaded)
        return
    for i, code in enumerate(plan["calls"]):
        emit(out, nonce, f"{i} " + timed(lambda c=code: canonical_text(eval(c, env[0])), job["per_s"], alarm, armed))


def test_worker(plan: dict, copies: dict, checks_builtins: dict, out: int, nonce: str, token: str, go) -> None:
    """The tests' thread: the main thread, where the program's signal handlers run, holds no harness frame."""
    try:
        go.acquire()  # released once the main thread has left the harness
        verdict = run_tests(plan, copies, checks_builtins)
        emit(out, nonce, "pass " + token if verdict == "pass" else verdict)
    finally:
        _exit(0)


def main() -> None:
    job = read_job()
    nonce, token = job.pop("nonce"), job.pop("pass_token", "")
    out = private_stdout()
    try:
        plan = plan_of(job)
    except SyntaxError as e:
        emit(out, nonce, ("fail " if job["mode"] == "tests" else "-1 err ") + describe(e, job["mode"] == "tests"))
        _exit(0)
    copies = module_copies()
    checks_builtins = {**_BUILTINS, "__import__": importer(copies)}
    gc.collect()  # the AST guard's class, before the program could list it
    arm(copies)
    if job["mode"] == "tests":
        _start_thread(test_worker, (plan, copies, checks_builtins, out, nonce, token, __corl_go__))  # noqa: F821
        return  # main.py releases the worker and waits; the worker ends the process
    run_calls(plan, job, copies, checks_builtins, out, nonce)
    emit(out, nonce, "end")
    _exit(0)


def program() -> str:
    """The sandbox's main.py: both sources, run in a namespace no name of the program can reach."""
    from pathlib import Path

    here = Path(__file__).resolve().parent
    values, harness = (here / "code_values.py").read_text(), (here / "code_harness.py").read_text()
    namespace = f"{{'__builtins__': dict(vars(_b)), '__name__': 'corl_harness', '__corl_values_source__': {values!r}, '__corl_go__': _go}}"
    return (
        "import _thread, builtins as _b\n"
        "_go, _never = _thread.allocate_lock(), _thread.allocate_lock()\n"
        "_go.acquire()\n"
        "_never.acquire()\n"
        f"exec(compile({harness!r}, 'corl_code_harness.py', 'exec', dont_inherit=True), {namespace})\n"
        "_go.release()  # tests mode: the worker thread may start\n"
        "while True:\n"
        "    _never.acquire()\n"
    )


if __name__ == "corl_harness":
    main()
