"""The program side of a judged run: the completion, and a stub that answers the judge's calls with plain data.

`program(solution)` is the sandbox's main.py: the solution's source and `wire`'s are
literals in it, so the program holds nothing it was not meant to see (no secret exists in
this design: see docs/architecture.md, "Code judging"). The stub keeps private copies of
fds 0 and 1 for the judge's requests and its replies and points 0 and 1 at /dev/null, so
the solution's prints cannot garble a reply by accident (a program that writes on the
reply fd on purpose only garbles its own calls). Then it runs the solution and answers
requests, one JSON line each way (corl.tasks.code.wire):

    -> {"id": n, "ping": true}                                 <- {"id": n, "ok": null}
    -> {"id": n, "call": name, "args": [...], "kwargs": {...}, "limit": seconds or null}
    <- {"id": n, "ok": value} | {"id": n, "err": "Kind", "msg": "..."}
    (any request, when the solution failed to load)            <- {"id": n, "load": "Kind: message"}

A call with a limit runs under ITIMER_REAL for that long (TimeoutError past it). Every run
sends the vote's calls first, each with the same limit, whether it serves the vote or the
tests (corl.tasks.code.judge): the timer says nothing about the mode.

Objects in arguments are rebuilt as instances of the solution's class of that name (or of a
bare stand-in class with that name, for a class only the tests define); objects of the
solution's classes in results are sent as their class name and attributes; other objects
(functions, modules, the standard library's classes) have no plain form and fail the call. Nothing here is trusted by
the judge: a hostile program can write any reply it likes, and the judge reads it as data.
"""


def program(solution: str) -> str:
    """main.py for one solution."""
    from pathlib import Path

    here = Path(__file__).resolve().parent
    wire, stub = (here / "wire.py").read_text(), (here / "stub.py").read_text()
    return f"__corl_wire__ = {wire!r}\n__corl_solution__ = {solution!r}\n" + stub


class _Obj:
    """An object of the solution's classes (or of a tests' stand-in) on its way out: class name and attributes."""

    __slots__ = ("name", "attrs")

    def __init__(self, name, attrs):
        self.name, self.attrs = name, attrs


class _Stub:  # pragma: no cover - runs inside the sandbox
    """The solution's namespace and the two private fds; `serve` answers the judge until it hangs up."""

    def __init__(self, wire_source: str, solution: str) -> None:
        import os

        self.requests, self.replies = os.fdopen(os.dup(0), "rb"), os.dup(1)
        null = os.open(os.devnull, os.O_RDWR)
        os.dup2(null, 0)
        os.dup2(null, 1)
        self.wire = {"__name__": "corl_wire"}
        exec(compile(wire_source, "corl_wire.py", "exec"), self.wire)
        self.space: dict = {"__name__": "solution"}
        self.stand_ins: dict = {}
        self.load_error = None
        try:
            exec(compile(solution, "solution.py", "exec"), self.space)
        except BaseException as e:
            self.load_error = f"{type(e).__name__}: {_message_of(e)}"

    def send(self, message: dict) -> None:
        import os

        try:
            data = self.wire["dump_line"](message)
        except (ValueError, TypeError):
            data = self.wire["dump_line"]({"id": message["id"], "err": "WireError", "msg": "reply not encodable"})
        while data:
            data = data[os.write(self.replies, data) :]

    def as_object(self, v):
        """(class name, attrs) of an instance of the solution's classes; ("it", items) of an iterator; None otherwise."""
        if hasattr(type(v), "__next__"):
            items = []
            for x in v:
                items.append(x)
                if len(items) > self.wire["MAX_ITEMS"]:
                    raise self.wire["WireError"]("an iterator too long")
            return "it", items
        if isinstance(v, type) or callable(v) or type(v).__module__ not in ("solution", "tests"):
            return None  # only the solution's classes and the tests' stand-ins have a structural form
        attrs = dict(getattr(v, "__dict__", {}))
        for name in getattr(type(v), "__slots__", ()):
            if hasattr(v, name):
                attrs[name] = getattr(v, name)
        return type(v).__qualname__, attrs

    def plain(self, v, depth=0):
        """Builtin subclasses (Counter, namedtuple, IntEnum, ...) as their builtin values, all the way down."""
        if depth > self.wire["MAX_DEPTH"]:
            raise self.wire["WireError"]("a value nested too deeply (or a cycle)")
        v = _plain_base(v)
        t = type(v)
        if t in (list, tuple, set, frozenset):
            return t(self.plain(x, depth + 1) for x in v)
        if t is dict:
            return {self.plain(k, depth + 1): self.plain(x, depth + 1) for k, x in v.items()}
        if t in (int, float, complex, str, bytes, bytearray, bool, range) or v is None:
            return v
        found = self.as_object(v)
        if found is None:
            return v  # encode refuses it
        if found[0] == "it":
            return [self.plain(x, depth + 1) for x in found[1]]
        return _Obj(found[0], {k: self.plain(x, depth + 1) for k, x in found[1].items()})

    def make_object(self, name, attrs):
        """An instance of the solution's class `name`, or of a bare stand-in for a class only the tests define."""
        cls = self.space.get(name)
        if not isinstance(cls, type):
            cls = self.stand_ins.setdefault(name, type(name, (), {"__module__": "tests"}))
        obj = cls.__new__(cls)
        for key, value in attrs.items():
            object.__setattr__(obj, key, value)
        return obj

    def answer(self, request: dict) -> dict:
        """The reply to one call: its value as plain data, or the exception it raised, by class name."""
        import signal

        rid = request.get("id")
        try:
            if request["call"] not in self.space:
                raise NameError(f"name {request['call']!r} is not defined")
            fn = self.space[request["call"]]
            args = self.wire["decode"](request["args"], self.make_object)
            kwargs = {k: self.wire["decode"](x, self.make_object) for k, x in request["kwargs"].items()}
            if request.get("limit"):
                signal.setitimer(signal.ITIMER_REAL, request["limit"])
            try:
                value = fn(*args, **kwargs)
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
            out = self.wire["encode"](self.plain(value), 0, lambda o: (o.name, o.attrs) if type(o) is _Obj else None)
            return {"id": rid, "ok": out}
        except BaseException as e:
            kind = type(e).__name__ if isinstance(type(e).__name__, str) else "Exception"
            return {"id": rid, "err": kind[:100], "msg": _message_of(e)}

    def serve(self) -> None:
        """One reply per request line, until EOF or a line that is not a request."""
        import signal

        signal.signal(signal.SIGALRM, _on_alarm)
        while line := self.requests.readline(self.wire["MAX_LINE"] + 1):
            try:
                request = self.wire["load_line"](line)
                rid = request.get("id")
            except self.wire["WireError"]:
                return
            if self.load_error is not None:
                self.send({"id": rid, "load": self.load_error})
            elif request.get("ping"):
                self.send({"id": rid, "ok": None})
            else:
                self.send(self.answer(request))


def _message_of(e: BaseException) -> str:  # pragma: no cover - runs inside the sandbox
    try:
        return str(e)[:300]
    except BaseException:
        return ""


def _plain_base(v):  # pragma: no cover - runs inside the sandbox
    for base in (bool, int, float, complex, str, bytes, tuple, list, dict, set, frozenset):
        if isinstance(v, base):
            return v if type(v) is base else base(v) if base is not dict else dict(v.items())
    return v


def _on_alarm(signum, frame):  # pragma: no cover - runs inside the sandbox
    raise TimeoutError("time limit of the call")


if "__corl_wire__" in globals():  # main.py in the sandbox
    _Stub(__corl_wire__, __corl_solution__).serve()  # noqa: F821
