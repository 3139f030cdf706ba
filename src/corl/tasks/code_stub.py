"""The program side of a judged run: the completion, and a stub that answers the judge's calls with plain data.

`program(solution)` is the sandbox's main.py: the solution's source and `code_wire`'s are
literals in it, so the program holds nothing it was not meant to see (no secret exists in
this design: see docs/architecture.md, "Code judging"). The stub keeps private copies of
fds 0 and 1 for the judge's requests and its replies and points 0 and 1 at /dev/null, so
the solution's prints cannot garble a reply by accident (a program that writes on the
reply fd on purpose only garbles its own calls). Then it runs the solution and answers
requests, one JSON line each way (corl.tasks.code_wire):

    -> {"id": n, "ping": true}                                 <- {"id": n, "ok": null}
    -> {"id": n, "call": name, "args": [...], "kwargs": {...}, "limit": seconds or null}
    <- {"id": n, "ok": value} | {"id": n, "err": "Kind", "msg": "..."}
    (any request, when the solution failed to load)            <- {"id": n, "load": "Kind: message"}

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
    wire, stub = (here / "code_wire.py").read_text(), (here / "code_stub.py").read_text()
    return f"__corl_wire__ = {wire!r}\n__corl_solution__ = {solution!r}\n" + stub


def _serve(wire_source: str, solution: str) -> None:  # pragma: no cover - runs inside the sandbox
    import os
    import signal

    requests, replies = os.fdopen(os.dup(0), "rb"), os.dup(1)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    wire = {"__name__": "corl_wire"}
    exec(compile(wire_source, "corl_wire.py", "exec"), wire)
    WireError, encode, decode = wire["WireError"], wire["encode"], wire["decode"]

    def send(message: dict) -> None:
        try:
            data = wire["dump_line"](message)
        except (ValueError, TypeError):
            data = wire["dump_line"]({"id": message["id"], "err": "WireError", "msg": "reply not encodable"})
        while data:
            data = data[os.write(replies, data) :]

    def message_of(e: BaseException) -> str:
        try:
            return str(e)[:300]
        except BaseException:
            return ""

    space: dict = {"__name__": "solution"}
    load_error = None
    try:
        exec(compile(solution, "solution.py", "exec"), space)
    except BaseException as e:
        load_error = f"{type(e).__name__}: {message_of(e)}"

    def as_object(v):
        """(class name, attrs) of an instance of the solution's classes; ("it", items) of an iterator; None otherwise."""
        if hasattr(type(v), "__next__"):
            items = []
            for x in v:
                items.append(x)
                if len(items) > wire["MAX_ITEMS"]:
                    raise WireError("an iterator too long")
            return "it", items
        if isinstance(v, type) or callable(v) or type(v).__module__ not in ("solution", "tests"):
            return None  # only the solution's classes and the tests' stand-ins have a structural form
        attrs = dict(getattr(v, "__dict__", {}))
        for name in getattr(type(v), "__slots__", ()):
            if hasattr(v, name):
                attrs[name] = getattr(v, name)
        return type(v).__qualname__, attrs

    def plain_base(v):
        for base in (bool, int, float, complex, str, bytes, tuple, list, dict, set, frozenset):
            if isinstance(v, base):
                return v if type(v) is base else base(v) if base is not dict else dict(v.items())
        return v

    def _plain(v, depth=0):
        """Builtin subclasses (Counter, namedtuple, IntEnum, ...) as their builtin values, all the way down."""
        if depth > wire["MAX_DEPTH"]:
            raise WireError("a value nested too deeply (or a cycle)")
        v = plain_base(v)
        t = type(v)
        if t in (list, tuple, set, frozenset):
            return t(_plain(x, depth + 1) for x in v)
        if t is dict:
            return {_plain(k, depth + 1): _plain(x, depth + 1) for k, x in v.items()}
        if t in (int, float, complex, str, bytes, bytearray, bool, range) or v is None:
            return v
        found = as_object(v)
        if found is None:
            return v  # encode refuses it
        if found[0] == "it":
            return [_plain(x, depth + 1) for x in found[1]]
        return _Obj(found[0], {k: _plain(x, depth + 1) for k, x in found[1].items()})

    class _Obj:
        __slots__ = ("name", "attrs")

        def __init__(self, name, attrs):
            self.name, self.attrs = name, attrs

    stand_ins: dict = {}

    def make_object(name, attrs):
        """An instance of the solution's class `name`, or of a bare stand-in for a class only the tests define."""
        cls = space.get(name)
        if not isinstance(cls, type):
            cls = stand_ins.setdefault(name, type(name, (), {"__module__": "tests"}))
        obj = cls.__new__(cls)
        for key, value in attrs.items():
            object.__setattr__(obj, key, value)
        return obj

    def on_alarm(signum, frame):
        raise TimeoutError("time limit of the call")

    signal.signal(signal.SIGALRM, on_alarm)
    while line := requests.readline(wire["MAX_LINE"] + 1):
        try:
            request = wire["load_line"](line)
            rid = request.get("id")
        except WireError:
            return
        if load_error is not None:
            send({"id": rid, "load": load_error})
            continue
        if request.get("ping"):
            send({"id": rid, "ok": None})
            continue
        try:
            if request["call"] not in space:
                raise NameError(f"name {request['call']!r} is not defined")
            fn = space[request["call"]]
            args = decode(request["args"], make_object)
            kwargs = {k: decode(x, make_object) for k, x in request["kwargs"].items()}
            if request.get("limit"):
                signal.setitimer(signal.ITIMER_REAL, request["limit"])
            try:
                value = fn(*args, **kwargs)
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
            reply = {"id": rid, "ok": encode(_plain(value), 0, lambda o: (o.name, o.attrs) if type(o) is _Obj else None)}
        except BaseException as e:
            kind = type(e).__name__ if isinstance(type(e).__name__, str) else "Exception"
            reply = {"id": rid, "err": kind[:100], "msg": message_of(e)}
        send(reply)


if "__corl_wire__" in globals():  # main.py in the sandbox
    _serve(__corl_wire__, __corl_solution__)  # noqa: F821
