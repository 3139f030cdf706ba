"""The judge: a trusted process that runs the vote's calls (and then the hidden tests) and calls the program through a proxy.

    python -I -S judge.py REQUEST_FD REPLY_FD   < job.json   > verdict line

Started by `corl.tasks.code.execute` on the host, outside the sandbox, with the two pipe ends
that reach the program's stub (corl.tasks.code.stub) and nothing else of it. It loads
`wire` and `values` by path (standard library only), reads its job (mode, the
prompt, setup, the vote's calls, the tests, the entry point, time limits) from stdin, and
writes one JSON verdict line on its stdout, which only the host reads:

- calls: {"outcome": [["ok", canonical text] | ["err", Kind], ...]}, one per call.
- tests: {"status": "ok"} when every test ran to its end; else {"status": s, "error": why}
  with s one of error (a test failed, or the solution raised or did not load), timeout (a
  call did not answer in time), exit (the program ended or closed its reply pipe),
  malformed (a reply that is not plain data of the wire format, too long, or for another
  request), memory (the program reported MemoryError), judge (the tests need a value the
  wire cannot carry).

One protocol for both (docs/architecture.md, "Code judging"): every run, whatever its mode,
first runs the vote's calls exactly as the vote does (`run_calls`: the same ping, deadlines,
per-call limits, requests and order); a tests run then goes on with the hidden tests. The
vote's run is thus a prefix of every tests run, and within one run each distinct call
reaches the program once (`Program.ask`): the tests check the very answers the vote saw.

The program is reached only as `Proxy` objects: calling one sends the arguments as plain
data and returns the decoded reply (plain values; objects as `code_values.Record`). A
failed exchange (timeout, exit, malformed) makes the run fail however the tests handle the
exception: it raises `Abort`, a BaseException, and is remembered.
"""

from __future__ import annotations

import builtins
import json
import os
import select
import sys
import time


def _load(name: str):
    """A module of this folder by path: the judge runs with -I -S, without corl on its path (and without importlib's cost)."""
    import types

    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), name + ".py")
    module = types.ModuleType(name)
    module.__file__ = path
    sys.modules[name] = module
    with open(path, encoding="utf-8") as f:
        exec(compile(f.read(), path, "exec"), module.__dict__)
    return module


if __name__ == "__main__":
    code_values, code_wire = _load("values"), _load("wire")
else:
    from corl.tasks.code import values as code_values
    from corl.tasks.code import wire as code_wire

TESTS_MODULE = "__corl_tests__"  # __module__ of the classes the tests and setup define
MARGIN_S = 1.0  # a call's answer may come this late after the stub's own per-call alarm
JUDGE_MEMORY_MB = 2048  # address space of the judge process (its own values and the tests' work)
_BUILTIN_NAMES = frozenset(dir(builtins))
_ITERATION_END = frozenset({"StopIteration", "StopAsyncIteration"})  # exceptions iteration swallows as "no more items"


class Abort(BaseException):
    """A failed exchange with the program; the tests cannot catch it into a pass (the run remembers it)."""

    def __init__(self, status: str, message: str, kind: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.kind = status, message, kind  # kind: the error kind a vote key shows


class ProgramError(Exception):
    """An exception the program reported whose class the judge does not take by name."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class Program:
    """The judge's end of the two pipes to the program's stub."""

    def __init__(self, request_fd: int, reply_fd: int) -> None:
        self.request_fd, self.reply_fd = request_fd, reply_fd
        os.set_blocking(request_fd, False)
        # poll, not select: the host's fd numbers come through pass_fds, and a trainer holding over
        # FD_SETSIZE (1024) fds would make select() refuse them (every program an "error", reward 0).
        self.writable, self.readable = select.poll(), select.poll()
        self.writable.register(request_fd, select.POLLOUT)
        self.readable.register(reply_fd, select.POLLIN)
        self.buffer = bytearray()
        self.next_id = -1
        self.failed: Abort | None = None
        self.answers: dict[str, dict] = {}  # the run's memo: a call's wire form -> the program's reply

    def ask(self, request: dict, deadline: float) -> dict:
        """The reply to a call, asked of the program only the first time the run makes this call.

        A repeated call is answered from the memo, so the tests check the answer the vote saw:
        a program cannot answer a call one way the first time and another the second. A
        TimeoutError is asked again (a slow call may finish within the tests' wall); a vote
        key holding one is no answer (corl.tasks.code.execute.behaviour_key), so nothing
        learnt from being asked twice reaches a key."""
        key = json.dumps([request["call"], request["args"], request["kwargs"]], sort_keys=True, separators=(",", ":"))
        reply = self.answers.get(key)
        if reply is None or reply.get("err") == "TimeoutError":
            reply = self.answers[key] = self.exchange(request, deadline)
        return reply

    def fail(self, status: str, message: str, kind: str | None = None) -> Abort:
        if self.failed is None:
            self.failed = Abort(status, message, kind)
        return self.failed

    def exchange(self, request: dict, deadline: float) -> dict:
        """Send one request, return its reply message (raises the run's Abort on any failure)."""
        if self.failed is not None:
            raise self.failed
        self.next_id = int.from_bytes(os.urandom(6), "big")  # not a secret: a stale or early line cannot match it
        request = {"id": self.next_id, **request}
        try:
            self._write(code_wire.dump_line(request), deadline)
            reply = code_wire.load_line(self._read_line(deadline))
        except code_wire.WireError as e:
            raise self.fail("malformed", f"malformed reply: {e}") from None
        if reply.get("id") != self.next_id or type(reply.get("id")) is not int:
            raise self.fail("malformed", "a reply to another request")
        if "load" in reply:
            text = _text(reply["load"])
            raise self.fail("error", text, text.partition(":")[0] or "Error")
        return reply

    def _write(self, data: bytes, deadline: float) -> None:
        while data:
            if not _wait(self.writable, deadline):
                raise self.fail("timeout", "the program did not take its call in time")
            try:
                data = data[os.write(self.request_fd, data) :]
            except BlockingIOError:
                continue
            except OSError:
                raise self.fail("exit", "the program ended before its tests did") from None

    def _read_line(self, deadline: float) -> bytes:
        """One line from the program, at most MAX_LINE bytes (the buffer grows linearly, each chunk scanned once)."""
        end = self.buffer.find(b"\n")
        while end < 0:
            if len(self.buffer) > code_wire.MAX_LINE:
                raise code_wire.WireError(f"a reply over {code_wire.MAX_LINE} bytes")
            if not _wait(self.readable, deadline):
                raise self.fail("timeout", "the program did not answer in time")
            chunk = os.read(self.reply_fd, 1 << 16)
            if not chunk:
                raise self.fail("exit", "the program ended before its tests did")
            newline = chunk.find(b"\n")
            end = len(self.buffer) + newline if newline >= 0 else -1
            self.buffer += chunk
        line = bytes(self.buffer[:end])
        del self.buffer[: end + 1]
        if len(line) > code_wire.MAX_LINE:
            raise code_wire.WireError(f"a reply over {code_wire.MAX_LINE} bytes")
        return line


def _wait(poller, deadline: float) -> bool:
    """Whether the fd of `poller` is ready (or hung up: the read or write then tells) before `deadline`."""
    return bool(poller.poll(max(deadline - time.monotonic(), 0) * 1000))


def _text(x, limit: int = 300) -> str:
    text = x if type(x) is str else "?"
    return "".join(c if c.isprintable() else " " for c in text[:limit])


def _send_form(o):
    """(class name, attributes) of a record, or of an instance of a class the tests (or setup) define."""
    if type(o) is code_values.Record:
        return code_values.record_parts(o)
    if type(o).__module__ == TESTS_MODULE and hasattr(o, "__dict__"):
        return type(o).__qualname__, vars(o)
    return None


class Unsendable(Exception):
    """A vote call whose arguments the wire cannot carry (a free name of an assert's lambda, say): no request is made."""


class Proxy:
    """A name of the program (its entry point, a class the tests build): calling it calls the program."""

    def __init__(self, program: Program, name: str, deadline, limit: float | None = None, in_tests: bool = True) -> None:
        self.program, self.name, self.deadline, self.limit, self.in_tests = program, name, deadline, limit, in_tests

    def __call__(self, *args, **kwargs):
        try:
            request = {
                "call": self.name,
                "args": code_wire.encode(list(args), 0, _send_form),
                "kwargs": {str(k): code_wire.encode(v, 0, _send_form) for k, v in kwargs.items()},
                "limit": self.limit,
            }
        except code_wire.WireError as e:
            if not self.in_tests:  # the program saw nothing: the run goes on, the same in both modes
                raise Unsendable(str(e)) from None
            raise self.program.fail("judge", f"the tests pass {self.name} a value the wire cannot carry: {e}") from None
        reply = self.program.ask(request, self.deadline())
        if "ok" in reply and len(reply) == 2:
            try:
                return code_wire.decode(reply["ok"], code_values.Record)
            except code_wire.WireError as e:
                raise self.program.fail("malformed", f"malformed value from {self.name}: {e}") from None
        if "err" not in reply:
            raise self.program.fail("malformed", "a reply with neither a value nor an error")
        raise _reported(self.program, _text(reply["err"], 100), _text(reply.get("msg", "")))


def _reported(program: Program, kind: str, message: str) -> BaseException:
    """The exception the program says its call raised: a builtin Exception class by name, else ProgramError."""
    if kind == "MemoryError":
        return program.fail("memory", "MemoryError: " + message)
    if kind in _ITERATION_END:  # raised as itself it would end the tests' map()/filter() early: all(map(...)) passes
        return ProgramError(kind, message)
    cls = getattr(builtins, kind, None) if kind in _BUILTIN_NAMES else None
    if isinstance(cls, type) and issubclass(cls, BaseException) and not issubclass(cls, Exception):
        return program.fail("error", f"{kind}: {message}", kind)  # SystemExit, KeyboardInterrupt: only the end passes
    if isinstance(cls, type) and issubclass(cls, Exception):
        try:
            return cls(message)
        except Exception:
            pass
    return ProgramError(kind, message)


def environment(job: dict, program: Program, deadline, limit: float | None, names_field: str) -> dict:
    """The tests' namespace: the trusted prompt's helpers, proxies for what the program defines, the setup.

    `names_field`: the job's list of the names the calls (call_names) or the tests (program_names) expect of the program."""
    env = {"__name__": TESTS_MODULE}
    for module in job.get("modules" if names_field == "program_names" else "call_modules") or ():
        env[module] = __import__(module)  # corl.tasks.code.execute.module_names: the judge's own standard library
    entry = job["entry_point"]
    if job.get("prompt"):
        exec(compile(job["prompt"], "prompt.py", "exec"), env)
        names = {entry}
    else:
        names = set(job.get(names_field) or ()) | {entry}  # corl.tasks.code.execute.program_names
    for name in names:
        env[name] = Proxy(program, name, deadline, limit, names_field == "program_names")
    if job.get("setup"):
        exec(compile(job["setup"], "setup.py", "exec"), env)
    return env


def describe(e: BaseException) -> str:
    kind = e.kind if isinstance(e, ProgramError) else type(e).__name__
    message = _text(str(e))
    return kind + (": " + message if message else "")


# The error kind a vote key shows for a failed exchange. The judge's own deadline is a timeout (a key holding
# one is no answer), never a malformed reply (a kind two programs can share by writing the same bad line).
FAILED_KIND = {"timeout": "TimeoutError", "exit": "EarlyExit", "malformed": "Malformed", "memory": "MemoryError"}


def run_calls(job: dict, program: Program, start: float) -> list:
    """The vote's phase, the same in every run: one outcome per call; once an exchange failed, the rest read as it."""
    try:
        program.exchange({"ping": True}, start + job["load_s"] + job["start_s"])
        env = environment(job, program, lambda: time.monotonic() + job["per_s"] + MARGIN_S, job["per_s"], "call_names")
    except Abort as e:
        return [["err", e.kind or FAILED_KIND.get(e.status, "Error")]] * len(job["calls"])
    except BaseException as e:  # noqa: BLE001 - the trusted setup failed: every call reads so
        return [["err", type(e).__name__]] * len(job["calls"])
    outcome = []
    for call in job["calls"]:
        try:
            outcome.append(["ok", code_values.canonical_text(eval(compile(call, "call.py", "eval"), env))])
        except Abort as e:
            outcome.append(["err", e.kind or FAILED_KIND.get(e.status, "Error")])
        except BaseException as e:  # noqa: BLE001
            outcome.append(["err", e.kind if isinstance(e, ProgramError) else type(e).__name__])
    return outcome


def judge_tests(job: dict, program: Program) -> dict:
    """After the vote's phase, the hidden tests against the same program; the verdict (module docstring)."""
    if program.failed is not None:
        return _failed(program)
    begin = time.monotonic()
    deadline = lambda: begin + job["wall_s"]  # noqa: E731
    try:
        env = environment(job, program, deadline, None, "program_names")
        exec(compile(job["tests"], "tests.py", "exec"), env)
    except Abort:
        pass
    except BaseException as e:  # noqa: BLE001 - every way the tests end but their end is a failure
        verdict = {"status": "error", "error": describe(e)}
        return verdict if program.failed is None else _failed(program)
    return {"status": "ok"} if program.failed is None else _failed(program)


def _failed(program: Program) -> dict:
    return {"status": program.failed.status, "error": program.failed.message}


def judge(job: dict, program: Program, start: float) -> dict:
    """The vote's calls, then (mode tests) the hidden tests: the program cannot tell which mode it serves."""
    outcome = run_calls(job, program, start)
    return {"outcome": outcome} if job["mode"] == "calls" else judge_tests(job, program)


def bound_self(cpu_s: int) -> None:
    """The judge's own limits: what the program's values make the tests do (list(range(2**60))) stays bounded."""
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (JUDGE_MEMORY_MB << 20, JUDGE_MEMORY_MB << 20))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 1))


def main() -> None:
    start = time.monotonic()
    verdict_fd = os.dup(1)
    os.dup2(2, 1)  # the tests' prints go to stderr, not into the verdict
    program = Program(int(sys.argv[1]), int(sys.argv[2]))
    job = json.loads(sys.stdin.buffer.read())
    calls_s = job["load_s"] + job["start_s"] + (job["per_s"] + MARGIN_S) * len(job["calls"])
    bound_self(int(calls_s + (job.get("wall_s") or 0)) + 5)
    verdict = judge(job, program, start)
    os.write(verdict_fd, json.dumps(verdict).encode() + b"\n")


if __name__ == "__main__":
    main()
