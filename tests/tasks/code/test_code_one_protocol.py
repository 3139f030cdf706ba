"""One protocol for votes and tests (issue 52): the program cannot tell the vote's run from a tests run.

The attack of the issue: a vote request carried a per-call `limit` and the stub armed
ITIMER_REAL only then, so `if signal.getitimer(signal.ITIMER_REAL)[0] > 0: return 'VOTE'`
gave every such program one constant vote key and still passed the hidden tests. Each
program below tells the modes apart by one thing the program can see (the timer, the
request's fields, its CPU rlimit, which call comes first, how many calls came, a call asked
twice, a timeout it fakes), answers 'VOTE' where it believes it serves the vote and the
right sum elsewhere. None may have both a key other than the honest one and a pass. Every
sandbox backend with walls installed here runs them; one that is not shows as a skip.
"""

from __future__ import annotations

import ast
import hashlib
import json

import pytest

from corl.sandbox import SandboxPool, SandboxUnavailable, detect
from corl.tasks.code.execute import code_answers, run_tests
from corl.tasks.code.programs import public_inputs
from corl.tasks.code.task import passes_hidden_tests, prepare_row, public_view

ADD = {
    "task_id": "add",
    "text": "Write a function to add two numbers.",
    "code": "def add(a, b):\n    return a + b",
    "test_list": ["assert add(1, 2) == 3", "assert add(2, 5) == 7", "assert add(-1, 1) == 0"],
    "test_setup_code": "",
}
HONEST = "def add(a, b):\n    return a + b\n"
N_CALLS = len(public_inputs(ADD))

_ATTACK = """
import resource, signal, sys
SHOWN = {{(1, 2), (2, 5), (-1, 1)}}
_asked, _mode = [], []
def _serves_the_vote(a, b):
    request = sys._getframe(2).f_locals.get("request", {{}})
    return {detector}
def add(a, b):
    vote = _serves_the_vote(a, b)
    _asked.append((a, b))
    return "VOTE" if vote else a + b
"""
DETECTORS = {
    "the call's timer is armed": "signal.getitimer(signal.ITIMER_REAL)[0] > 0",
    "the request carries a limit": "bool(request.get('limit'))",
    "the request has other fields than a test's": "sorted(request) != ['args', 'call', 'id', 'kwargs']",
    "the CPU rlimit is not the tests' 15 s": "resource.getrlimit(resource.RLIMIT_CPU)[0] != 15",
    "the first call is not a shown one": "(_mode or _mode.append((a, b) not in SHOWN) or _mode)[0]",
    "the first calls, as many as the vote makes": f"len(_asked) < {N_CALLS}",
    "a call asked for the first time": "(a, b) not in _asked",
}
# A faked timeout on each unshown call the first time it comes, the right sum after: the tests ask a timed-out call again.
FAKED_TIMEOUT = """
_asked = []
def add(a, b):
    first = (a, b) not in _asked
    _asked.append((a, b))
    if first and (a, b) not in {(1, 2), (2, 5), (-1, 1)}:
        raise TimeoutError("time limit of the call")
    return a + b
"""
# Not a mode but an input: 'VOTE' on every call the prompt does not show. The dataset's tests check only shown calls;
# the `tests` reward's extra asserts (corl.tasks.code.plus) check every vote input.
UNSHOWN_INPUTS = _ATTACK.format(detector="(a, b) not in SHOWN")


def _backend(name: str):
    try:
        works, why = detect(name).walls, "no walls"
    except SandboxUnavailable as e:
        works, why = False, str(e)
    return pytest.param(name, marks=pytest.mark.skipif(not works, reason=f"{name}: {why}"))


@pytest.fixture(scope="module", params=[_backend("bwrap"), _backend("unshare")])
def pool(request):
    with SandboxPool(workers=2, backend=request.param) as p:
        yield p


def _keys(texts: list[str], pool) -> list[str | None]:
    return code_answers(texts, public_view(prepare_row(ADD)), pool)[1]


def test_no_program_has_both_its_own_vote_key_and_a_pass(pool, monkeypatch):
    monkeypatch.setattr("corl.tasks.code.execute.default_pool", lambda: pool)
    attacks = {name: _ATTACK.format(detector=d) for name, d in DETECTORS.items()} | {"a faked timeout": FAKED_TIMEOUT}
    texts = [HONEST, *attacks.values()]
    keys = _keys(texts, pool)
    passed = [ok for (ok,) in passes_hidden_tests(texts, [ADD] * len(texts), 1, plus=False)]
    assert keys[0] is not None and passed[0]  # the honest program: its key and a pass
    both = {name: (keys[i], passed[i]) for i, name in enumerate(attacks, 1) if keys[i] not in (None, keys[0]) and passed[i]}
    assert sorted(both) == []
    assert keys[-1] is None  # the faked timeout: no vote answer


def test_an_answer_keyed_on_unshown_inputs_passes_only_the_datasets_tests(pool, monkeypatch):
    """What remains by design: a program may answer an input the tests never check any way it likes. The vote
    asks the prompt's calls and their mutants; MBPP's own tests check the shown ones; the `tests` reward checks them
    all (plus), so there the answer it gave the vote is the answer it is graded on."""
    monkeypatch.setattr("corl.tasks.code.execute.default_pool", lambda: pool)
    keys = _keys([HONEST, UNSHOWN_INPUTS], pool)
    assert keys[1] not in (None, keys[0])
    assert passes_hidden_tests([UNSHOWN_INPUTS], [ADD], 1, plus=False) == [[True]]
    assert passes_hidden_tests([UNSHOWN_INPUTS], [ADD], 1) == [[False]]


# Everything the program can see at each call, as one text: the request (without its random id), every request
# before it, the timer, every rlimit, environment, argv, folder and open fds.
OBSERVER = """
import json, os, resource, signal, sys
_requests = []
def add(a, b):
    request = {k: v for k, v in sys._getframe(1).f_locals["request"].items() if k != "id"}
    _requests.append(request)
    limits = {name: resource.getrlimit(getattr(resource, name)) for name in dir(resource) if name.startswith("RLIMIT_")}
    seen = {"requests": _requests, "timer": signal.getitimer(signal.ITIMER_REAL)[0] > 0, "rlimits": limits,
            "env": dict(os.environ), "argv": sys.argv, "cwd": os.getcwd(), "fds": sorted(os.listdir("/proc/self/fd"))}
    return json.dumps(seen, sort_keys=True)
"""


def test_every_vote_call_sees_the_same_in_a_tests_run(pool):
    """The tests run reports (through its verdict) a digest of what the program saw at each vote call; the vote's
    key holds what it saw itself. They are equal call by call."""
    calls = public_inputs(ADD)
    digests = ", ".join(f"hashlib.sha256({c}.encode()).hexdigest()[:12]" for c in calls)
    row = {**ADD, "test_list": [f"assert isinstance({c}, str)" for c in calls[-3:]], "plus_tests": [f"assert False, [{digests}]"]}
    row["test_list"] = ["import hashlib", *row["test_list"]]
    assert public_inputs(row) == calls
    _, keys = code_answers([OBSERVER], {**row, "public_inputs": calls}, pool)
    seen = [ast.literal_eval(text) for _, text in json.loads(keys[0])]
    assert json.loads(seen[0])["timer"] and len(json.loads(seen[-1])["requests"]) == len(calls)
    run = run_tests([OBSERVER], [row], pool)[0]
    assert run.status == "error" and run.error.startswith("AssertionError: ")
    reported = ast.literal_eval(run.error.removeprefix("AssertionError: "))
    assert reported == [hashlib.sha256(s.encode()).hexdigest()[:12] for s in seen]
