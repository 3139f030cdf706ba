"""`corl rephrase` against a fake OpenAI-compatible server on loopback, and its checks by hand.

The server (http.server in a thread, port 0) answers /v1/chat/completions and misbehaves
on purpose for problems carrying a marker: [429x2] (two 429s with Retry-After: 0, then an
answer), [429ra=S] (one 429 with Retry-After: S), [500x1], [slow1] (first answer later
than the client's timeout), [garbage] (200 with a body that is not JSON, always),
[garbage1] (once), [400] (a client error, not retried), [hold] (no answer until the test
releases it). The client is the real `openai` SDK talking HTTP to it; nothing is mocked.
"""

from __future__ import annotations

import json
import logging
import os
import re
import socket
import subprocess
import sys
import threading
import time
import traceback
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from typer.testing import CliRunner

from corl.cli import app
from corl.studies.rephrase import (
    DEFAULT_REPHRASE_INSTRUCTION,
    FatalRequestError,
    JournalEntry,
    OpenAIChatClient,
    RephraseError,
    RequestFailed,
    RewriteJournal,
    build_messages,
    clean_rewrite,
    dropped_numbers,
    http_rewriter,
    journal_path,
    numbers_in,
    rephrase_rows,
    spelled_numbers,
)

SECRET = "sk-test-0123456789-do-not-leak"
CLIENT_TIMEOUT = 0.8  # seconds; [slow1] sleeps twice as long; ample for loopback on a busy CPU
FAST = dict(timeout=CLIENT_TIMEOUT, max_retries=3, base_delay=0.005, max_delay=0.02)


# ------------------------------------------------------------------------ fake server


class FakeChatServer:
    """Scripted OpenAI-compatible endpoint; records each request's problem and Authorization."""

    def __init__(self):
        self.counts: Counter[str] = Counter()  # problem -> requests received
        self.auth: list[str | None] = []
        self.bodies: list[dict] = []
        self.in_flight = self.max_in_flight = 0  # requests being answered now, and the most at once
        self.healthy = False  # True: every marker is ignored (the outage is over)
        self.release = threading.Event()
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output clean
                pass

            def do_POST(self):
                with server.lock:
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                try:
                    self._answer()
                finally:
                    with server.lock:
                        server.in_flight -= 1

            def _answer(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                problem = body["messages"][-1]["content"]
                with server.lock:
                    server.counts[problem] += 1
                    n = server.counts[problem]
                    server.auth.append(self.headers.get("Authorization"))
                    server.bodies.append(body)
                if "[hold]" in problem and not server.healthy:
                    server.release.wait(30)
                if self.path != "/v1/chat/completions":
                    return self._send(404, b'{"error": "no such route"}')
                if self.headers.get("Authorization") != f"Bearer {SECRET}":
                    # Like some real servers, echo what was sent: the client must scrub it.
                    return self._send(401, json.dumps({"error": f"bad key {self.headers.get('Authorization')}"}).encode())
                if not server.healthy:
                    if "[429x2]" in problem and n <= 2:
                        return self._send(429, b'{"error": "rate limited"}', {"Retry-After": "0"})
                    if (wait := re.search(r"\[429ra=([^\]]+)\]", problem)) and n <= 1:
                        return self._send(429, b'{"error": "rate limited"}', {"Retry-After": wait.group(1)})
                    if "[500x1]" in problem and n <= 1:
                        return self._send(500, b'{"error": "oops"}')
                    if "[slow1]" in problem and n <= 1:
                        time.sleep(CLIENT_TIMEOUT * 2)
                    if "[garbage]" in problem or ("[garbage1]" in problem and n <= 1):
                        return self._send(200, b'{"choices": [ not json')
                    if "[400]" in problem:
                        return self._send(400, b'{"error": "content policy [/red]"}')  # no console markup
                    if "[cut]" in problem:
                        return self._reply("In a shop, " + problem, finish="length")
                if "[drop]" in problem:
                    return self._reply("In a shop, someone buys some apples.")
                return self._reply("In a shop, " + problem)

            def _reply(self, content, finish="stop"):
                message = {"role": "assistant", "content": content}
                data = {
                    "id": "c",
                    "object": "chat.completion",
                    "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                }
                self._send(200, json.dumps(data).encode())

            def _send(self, status, payload, headers=None):
                try:
                    self.send_response(status)
                    for k, v in (headers or {}).items():
                        self.send_header(k, v)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except OSError:  # the client gave up (timeout) or was killed
                    pass

        class Server(ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request, client_address):
                pass

        self.httpd = Server(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def requests_for(self, marker: str) -> int:
        return sum(n for problem, n in self.counts.items() if marker in problem)

    def close(self):
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server():
    s = FakeChatServer()
    yield s
    s.close()


@pytest.fixture(autouse=True)
def no_proxy(monkeypatch):
    """Loopback must not go through a proxy from the environment."""
    for var in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(var, raising=False)


def client_for(server, **kw):
    return OpenAIChatClient(server.base_url, "fake-model", SECRET, **(FAST | kw))


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


# ------------------------------------------------------------- pure parts, by hand


def test_numbers_in_canonicalises_separators_zeros_and_decimals():
    assert numbers_in("Pay $1,000 for 3.50 kg, then 007 more and .5 of it.") == ["1000", "3.5", "7", "0.5"]
    assert numbers_in("the list 1,2,3 and 12,345,678") == ["1", "2", "3", "12345678"]
    assert numbers_in("1,2345") == ["1", "2345"]  # not a thousands group
    assert numbers_in("$x^2+3x-4$; it is 5.") == ["2", "3", "4", "5"]  # repeated 2 once; sign ignored; "5." is 5
    assert numbers_in("no digits here") == []


def test_spelled_numbers():
    assert spelled_numbers("Three friends and twenty-five apples, a dozen eggs, ninety pens") == {"3", "25", "12", "90"}
    assert spelled_numbers("someone, anyone, often, tone") == set()  # words only as whole words


def test_dropped_numbers_by_hand():
    original = "A store sells 12 pens at $1.50 each and 1,000 sheets. Find the cost of $\\frac{3}{4}$ of them."
    # Kept: 12 as "a dozen", 1.50 as "1.5", 1,000 as "1000", 3 as "three"; dropped: 4.
    rewrite = "Mia buys a dozen pens that cost $1.5 each, plus 1000 sheets; what do three quarters of them cost?"
    assert dropped_numbers(original, rewrite) == ["4"]
    assert dropped_numbers(original, original) == []
    assert dropped_numbers("Compute 2+2.", "Work out the sum of two and two.") == []
    assert dropped_numbers("Find 7% of 250.", "Find seven percent of some amount.") == ["250"]
    assert dropped_numbers("no numbers", "still none, but 5 added") == []  # added numbers are not flagged


def test_build_messages_system_or_template():
    problem = "Find $\\frac{1}{2}+x$ when {x} is 3."
    assert build_messages(problem, "Rewrite.") == [
        {"role": "system", "content": "Rewrite."},
        {"role": "user", "content": problem},
    ]
    assert build_messages(problem, "Reword this: {problem} Go.") == [
        {"role": "user", "content": "Reword this: Find $\\frac{1}{2}+x$ when {x} is 3. Go."}
    ]
    assert build_messages(problem)[0] == {"role": "system", "content": DEFAULT_REPHRASE_INSTRUCTION}


def test_clean_rewrite_drops_a_think_block():
    assert clean_rewrite("<think>\nhmm 42\n</think>\n  In a shop, 3 pens.  ") == "In a shop, 3 pens."
    assert clean_rewrite("  plain  ") == "plain"


# ---------------------------------------------------------------- the HTTP client


def test_client_retries_429_500_timeouts_and_malformed_json(server):
    client = client_for(server)
    for marker, requests in (("[429x2]", 3), ("[500x1]", 2), ("[slow1]", 2), ("[garbage1]", 2)):
        problem = f"Buy 3 pens {marker}"
        assert client.complete(build_messages(problem, "Rewrite.")) == "In a shop, " + problem
        assert server.counts[problem] == requests, marker
    assert set(server.auth) == {f"Bearer {SECRET}"}
    assert server.bodies[0]["model"] == "fake-model" and server.bodies[0]["max_tokens"] == 1024


def test_client_gives_up_on_malformed_json_after_retries(server):
    client = client_for(server, max_retries=2)
    with pytest.raises(RequestFailed, match="gave up after 3 attempts.*malformed response"):
        client.complete(build_messages("[garbage] 1+1", "Rewrite."))
    assert server.requests_for("[garbage]") == 3


def test_client_does_not_retry_400_or_cut_off_rewrites(server):
    client = client_for(server)
    with pytest.raises(RequestFailed, match="HTTP 400: .*content policy"):
        client.complete(build_messages("[400] 1+1", "R"))
    with pytest.raises(RequestFailed, match="raise --max-tokens"):
        client.complete(build_messages("[cut] 1+1", "R"))
    assert server.requests_for("[400]") == 1 and server.requests_for("[cut]") == 1


def timed_complete(client, problem: str) -> float:
    start = time.monotonic()
    assert client.complete(build_messages(problem, "R")) == "In a shop, " + problem
    return time.monotonic() - start


def test_client_waits_as_retry_after_says_capped_by_max_delay(server, monkeypatch):
    """The waits the SDK sleeps between tries, recorded (what the client asked for, not how long a busy CPU took)."""
    import openai._base_client as sdk

    waits: list[float] = []

    class Recorded:
        def __getattr__(self, name):
            return getattr(time, name)

        def sleep(self, seconds):
            waits.append(seconds)
            time.sleep(seconds)

    monkeypatch.setattr(sdk, "time", Recorded())
    # Retry-After: 0.6 is waited out although the backoff would be ~1 ms.
    timed_complete(client_for(server, base_delay=0.001, max_delay=5.0), "[429ra=0.6] 2 pens")
    # Retry-After: 30 is cut to max_delay (the SDK alone would wait the full 30 s).
    timed_complete(client_for(server, base_delay=0.001, max_delay=0.05), "[429ra=30] 2 pens")
    assert waits == [0.6, 0.05]
    # No Retry-After: the backoff, base_delay halved at most by the jitter.
    timed_complete(client_for(server, base_delay=0.4, max_delay=5.0), "[500x1] 2 pens")
    assert len(waits) == 3 and 0.2 <= waits[2] <= 0.4
    assert server.requests_for("[429ra=") == 4 and server.requests_for("[500x1]") == 2


def assert_no_key(key: str, err: BaseException, *texts: str) -> None:
    """The key is in no error text (the whole traceback included) and no log or printed line."""
    assert err.__context__ is None and err.__cause__ is None  # no SDK exception (holding the server's echo) chained
    assert key not in "".join(traceback.format_exception(err))
    for text in texts:
        assert key not in text


def test_401_fails_at_once_naming_the_endpoint_not_the_key(server, caplog, capsys):
    caplog.set_level(logging.DEBUG)  # the SDK's and the HTTP stack's debug logs too
    client = OpenAIChatClient(server.base_url, "m", "sk-wrong-key-123", **FAST)
    with pytest.raises(FatalRequestError) as err:
        client.complete(build_messages("1+1", "R"))
    message = str(err.value)
    assert "HTTP 401" in message and "check the API key" in message and f"{server.base_url}/chat/completions" in message
    assert "bad key Bearer ***" in message  # the server echoed the key; the body snippet has it replaced
    assert server.counts["1+1"] == 1  # not retried
    assert server.auth == ["Bearer sk-wrong-key-123"]  # it was sent, so the echo really held it
    assert caplog.records  # the logs were captured, so the next check can fail
    assert_no_key("sk-wrong-key-123", err.value, repr(client), caplog.text, *capsys.readouterr())


def test_without_a_key_no_authorization_header_is_sent(server, monkeypatch):
    """The SDK would fall back to OPENAI_API_KEY; a server picked with --api-key-env '' must not get it."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-the-environment")
    with pytest.raises(FatalRequestError, match="HTTP 401"):  # the fake server wants a key
        OpenAIChatClient(server.base_url, "m", None, **FAST).complete(build_messages("1+1", "R"))
    assert server.auth == [None]


@pytest.fixture
def hang_up_server():
    """A TCP server that accepts each connection and closes it without answering; counts connections."""
    listener = socket.create_server(("127.0.0.1", 0))
    accepted = []

    def serve():
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:  # closed by the test
                return
            accepted.append(conn)
            conn.close()

    threading.Thread(target=serve, daemon=True).start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}/v1", accepted
    listener.close()


def test_connection_errors_are_retried_then_reported_without_the_key(hang_up_server, caplog, capsys):
    caplog.set_level(logging.DEBUG)
    base_url, accepted = hang_up_server
    client = OpenAIChatClient(base_url, "m", SECRET, **(FAST | {"max_retries": 2}))
    with pytest.raises(RequestFailed, match=f"gave up after 3 attempts.*cannot connect to {base_url}/chat/completions") as err:
        client.complete(build_messages("1+1", "R"))
    assert len(accepted) == 3  # the first try and two retries
    assert caplog.records
    assert_no_key(SECRET, err.value, caplog.text, *capsys.readouterr())

    with socket.create_server(("127.0.0.1", 0)) as s:  # a port nobody listens on once this closes
        refused = f"http://127.0.0.1:{s.getsockname()[1]}/v1"
    with pytest.raises(RequestFailed, match="gave up after 2 attempts.*cannot connect.*refused") as err:
        OpenAIChatClient(refused, "m", SECRET, **(FAST | {"max_retries": 1})).complete(build_messages("1+1", "R"))
    assert_no_key(SECRET, err.value)


def test_requests_in_flight_never_exceed_the_concurrency(server, tmp_path):
    rows = [{"id": i, "problem": f"{i} pens [hold]"} for i in range(8)]
    client = client_for(server, timeout=30)  # held requests must not time out and be retried
    result = {}
    run = threading.Thread(
        target=lambda: result.update(report=rephrase_rows(rows, tmp_path / "o.jsonl", http_rewriter(client, 3)))
    )
    run.start()
    deadline = time.monotonic() + 20
    while sum(server.counts.values()) < 3 and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.3)  # time for a 4th request to arrive, were one allowed
    assert sum(server.counts.values()) == 3
    server.release.set()
    run.join(30)
    assert result["report"].rewritten == 8 and server.max_in_flight == 3
    assert all(n == 1 for n in server.counts.values())


# --------------------------------------------------------------- journal and resume


def test_journal_cuts_a_torn_last_line_and_appends_after_it(tmp_path):
    path = tmp_path / "out.jsonl.journal.jsonl"
    entry = JournalEntry("s", "i", "m", "text")
    journal = RewriteJournal(path)
    journal.append("a", entry)
    journal.append(7, entry)
    journal.close()
    with path.open("a") as f:
        f.write('{"id": "c", "source_sha": "s", "instr')  # the crash hit mid-line
    journal = RewriteJournal(path)
    assert set(journal.read()) == {"a", "7"} and journal.torn_lines == 1
    journal.append("c", entry)
    journal.close()
    assert set(RewriteJournal(path).read()) == {"a", "7", "c"}
    assert path.read_text().count("\n") == 3


def fake_rewriter(log: list[str], fail: set[str] = frozenset()):
    """Rewrites every problem as 'R: <problem>' (failing those in `fail`), logging what it was asked."""

    def run(jobs):
        for i, messages in enumerate(jobs):
            problem = messages[-1]["content"]
            log.append(problem)
            yield (i, None, "nope") if problem in fail else (i, f"R: {problem}", None)

    return run


def test_rephrase_rows_resumes_redoes_edited_rows_and_refuses_another_instruction(tmp_path):
    rows = [{"id": f"r{i}", "problem": f"p{i}", "answer": str(i)} for i in range(4)]
    out = tmp_path / "out.jsonl"
    log: list[str] = []
    report = rephrase_rows(rows, out, fake_rewriter(log, fail={"p2"}), instruction="I")
    assert (report.rewritten, report.failures, report.output_written) == (3, {"r2": "nope"}, False)
    assert not out.exists()

    rows[1]["problem"] = "p1 edited"
    log.clear()
    report = rephrase_rows(rows, out, fake_rewriter(log), instruction="I")
    assert sorted(log) == ["p1 edited", "p2"] and report.reused == 2 and report.output_written
    assert [r["problem_rephrased"] for r in read_jsonl(out)] == ["R: p0", "R: p1 edited", "R: p2", "R: p3"]

    with pytest.raises(RephraseError, match="another instruction"):
        rephrase_rows(rows, out, fake_rewriter([]), instruction="J")


def test_rows_without_ids_use_the_row_index_and_duplicates_are_refused(tmp_path):
    rows = [{"problem": "a"}, {"problem": "b"}]
    rephrase_rows(rows, tmp_path / "o.jsonl", fake_rewriter([]))
    assert read_jsonl(tmp_path / "o.jsonl") == [
        {"problem": "a", "problem_rephrased": "R: a"},
        {"problem": "b", "problem_rephrased": "R: b"},
    ]
    assert set(RewriteJournal(journal_path(tmp_path / "o.jsonl")).read()) == {"0", "1"}
    with pytest.raises(RephraseError, match="row 2: id 'x' repeats row 1"):
        rephrase_rows([{"id": "x", "problem": "a"}, {"id": "x", "problem": "b"}], tmp_path / "d.jsonl", fake_rewriter([]))
    with pytest.raises(RephraseError, match="row 1: field 'problem' is missing.*columns: question"):
        rephrase_rows([{"question": "a"}], tmp_path / "e.jsonl", fake_rewriter([]))


def test_fatal_error_stops_the_run_and_keeps_finished_rows(server, tmp_path):
    """Row 0 gets a 401 while the only worker waits on row 1: rows 2.. must never be sent."""
    rows = [{"id": i, "problem": f"{i} pens" + (" [hold]" if i == 1 else "")} for i in range(10)]
    client = OpenAIChatClient(server.base_url, "m", "sk-bad", **FAST)
    report = rephrase_rows(rows, tmp_path / "o.jsonl", http_rewriter(client, concurrency=1))
    assert report.stopped and "401" in report.stopped and "check the API key" in report.stopped
    assert not report.output_written and report.unfinished == 10
    assert sum(server.counts[r["problem"]] for r in rows[2:]) == 0  # queued requests were cancelled


# --------------------------------------------------------------------- the command

ROWS = [
    {"id": "a", "problem": "Tom has 3 apples and buys 4 more. How many?", "answer": "7", "level": 1},
    {"id": "b", "problem": "Compute $\\frac{1}{2}+\\frac{1}{4}$. [429x2]", "answer": "3/4", "level": 2},
    {"id": "c", "problem": "What is 12 * 12? [500x1]", "answer": "144", "level": None},
    {"id": "d", "problem": "Solve 2x = 10. [slow1]", "answer": "5", "level": 3},
    {"id": "e", "problem": "Add 5 and 6. [garbage]", "answer": "11", "level": 1},
    {"id": "f", "problem": "Subtract 9 from 20. [400]", "answer": "11", "level": 1},
    {"id": "g", "problem": "Buy 8 apples at 2 dollars. [drop]", "answer": "16", "level": 1},
]


def cli_args(server, data: Path, out: Path, *extra: str) -> list[str]:
    return [
        "rephrase", str(data), "-o", str(out), "--model", "fake-model", "--base-url", server.base_url,
        "--api-key-env", "FAKE_API_KEY", "--concurrency", "3", "--timeout", str(CLIENT_TIMEOUT),
        "--max-retries", "3", "--retry-base-delay", "0.005", "--retry-max-delay", "0.02", *extra,
    ]  # fmt: skip


def test_command_retries_reports_failures_by_id_then_a_rerun_completes(server, tmp_path):
    data = write_jsonl(tmp_path / "data.jsonl", ROWS)
    out = tmp_path / "out.jsonl"
    runner = CliRunner()
    env = {"FAKE_API_KEY": SECRET}

    first = runner.invoke(app, cli_args(server, data, out), env=env)
    assert first.exit_code == 1, first.output
    assert "2 rows failed" in first.output
    assert set(re.search(r"ids: ([^)]*)", first.output).group(1).split(", ")) == {"e", "f"}
    assert re.search(r"row e: gave up after 4 attempts.*malformed", first.output)
    assert re.search(r"row f: HTTP 400: .*content policy \[/red\]", first.output)
    assert "5/7 rows done" in first.output and "not written" in first.output
    assert not out.exists()
    assert server.counts[ROWS[1]["problem"]] == 3 and server.counts[ROWS[2]["problem"]] == 2
    assert server.counts[ROWS[3]["problem"]] == 2 and server.counts[ROWS[4]["problem"]] == 4

    server.healthy = True  # the outage is over; only e and f should be asked again
    before = Counter(server.counts)
    second = runner.invoke(app, cli_args(server, data, out), env=env)
    assert second.exit_code == 0, second.output
    assert server.counts - before == Counter({ROWS[4]["problem"]: 1, ROWS[5]["problem"]: 1})
    assert "7 rows: 5 already done, 2 to rewrite" in second.output

    written = read_jsonl(out)
    assert [r["id"] for r in written] == [r["id"] for r in ROWS]  # same rows, same order
    for row, new in zip(ROWS, written):
        assert {k: v for k, v in new.items() if k != "problem_rephrased"} == row  # every field kept
    assert written[0]["problem_rephrased"] == "In a shop, " + ROWS[0]["problem"]
    assert "numbers check: 1/7 rewrites lack a number" in second.output and "row g: missing 8, 2" in second.output

    # The key went in every Authorization header and nowhere else.
    assert set(server.auth) == {f"Bearer {SECRET}"}
    assert all(SECRET not in json.dumps(body) for body in server.bodies)
    for text in (first.output, second.output, out.read_text(), journal_path(out).read_text()):
        assert SECRET not in text


def test_command_instruction_and_field_options(server, tmp_path):
    rows = [{"uid": 10, "question": "Share 6 pies among 3 kids.", "problem": "unused"}]
    data = write_jsonl(tmp_path / "data.jsonl", rows)
    out = tmp_path / "out.jsonl"
    (tmp_path / "inst.txt").write_text("Reword as a story: {problem}\n")
    args = cli_args(server, data, out, "--field", "question", "--id-field", "uid", "--new-field", "q2",
                    "--instruction-file", str(tmp_path / "inst.txt"), "--extra-body", '{"top_p": 0.5, "max_tokens": null}')  # fmt: skip
    result = CliRunner().invoke(app, args, env={"FAKE_API_KEY": SECRET})
    assert result.exit_code == 0, result.output
    assert read_jsonl(out) == [rows[0] | {"q2": "In a shop, Reword as a story: Share 6 pies among 3 kids."}]
    body = server.bodies[-1]
    assert body["messages"] == [{"role": "user", "content": "Reword as a story: Share 6 pies among 3 kids."}]
    assert body["top_p"] == 0.5 and "max_tokens" not in body


def test_command_errors_tell_what_to_do(server, tmp_path):
    data = write_jsonl(tmp_path / "data.jsonl", ROWS[:1])
    runner = CliRunner()
    result = runner.invoke(app, cli_args(server, data, tmp_path / "o.jsonl"), env={"FAKE_API_KEY": None})
    assert result.exit_code == 2 and "FAKE_API_KEY is not set" in result.output
    result = runner.invoke(app, cli_args(server, data, tmp_path / "o.jsonl", "--field", "question"), env={"FAKE_API_KEY": SECRET})
    assert result.exit_code == 2 and "field 'question' is missing" in result.output and "set --field" in result.output
    result = runner.invoke(app, cli_args(server, data, tmp_path / "o.parquet"), env={"FAKE_API_KEY": SECRET})
    assert result.exit_code == 2 and "must be a .jsonl file" in result.output
    result = runner.invoke(app, cli_args(server, data, data), env={"FAKE_API_KEY": SECRET})
    assert result.exit_code == 2 and "must not overwrite the input" in result.output
    result = runner.invoke(app, cli_args(server, data, tmp_path / "o.jsonl"), env={"FAKE_API_KEY": "sk-wrong"})
    assert result.exit_code == 1 and "stopped: HTTP 401" in result.output and "sk-wrong" not in result.output


def test_crash_mid_run_then_resume_loses_and_duplicates_nothing(server, tmp_path):
    """SIGKILL while row 3 is in flight, plus a torn journal line; the rerun finishes exactly the rest."""
    rows = [{"id": f"r{i}", "problem": f"Row {i}: buy {i} pens." + (" [hold]" if i == 3 else "")} for i in range(6)]
    data = write_jsonl(tmp_path / "data.jsonl", rows)
    out = tmp_path / "out.jsonl"
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()} | {"FAKE_API_KEY": SECRET}
    args = cli_args(server, data, out)
    args[args.index("--concurrency") + 1] = "1"
    args[args.index("--timeout") + 1] = "30"
    proc = subprocess.Popen([sys.executable, "-m", "corl", *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    journal = journal_path(out)
    try:
        deadline = time.monotonic() + 30
        while server.counts[rows[3]["problem"]] == 0 or not journal.exists() or journal.read_text().count("\n") < 3:
            assert proc.poll() is None and time.monotonic() < deadline, (
                proc.stdout.read() if proc.poll() is not None else "timeout"
            )
            time.sleep(0.05)
    finally:
        proc.kill()
        proc.wait()
    assert journal.read_text().count("\n") == 3 and not out.exists()
    with journal.open("a") as f:
        f.write('{"id": "r3", "source_sha": "0f')  # torn write of the row in flight

    server.release.set()
    result = CliRunner().invoke(app, cli_args(server, data, out), env={"FAKE_API_KEY": SECRET})
    assert result.exit_code == 0, result.output
    assert "6 rows: 3 already done, 3 to rewrite" in result.output
    assert [r["id"] for r in read_jsonl(out)] == [r["id"] for r in rows]
    assert [server.counts[r["problem"]] for r in rows] == [1, 1, 1, 2, 1, 1]  # only r3 was asked twice
    lines = [json.loads(line) for line in journal.read_text().splitlines()]
    assert sorted(rec["id"] for rec in lines) == [r["id"] for r in rows]  # each row once, torn line gone


# ------------------------------------------------------- local model and --check

TINY_ROWS = [
    {"id": f"t{i}", "problem": p, "answer": a}
    for i, (p, a) in enumerate([("19%9=?", "1"), ("2x+4=22, x=?", "9"), ("85%2=?", "1")])
]


@pytest.fixture(scope="module")
def solver_dir(tmp_path_factory) -> Path:
    """A tiny char-level Llama taught in a few dozen steps to answer `<problem>\n` with `\boxed{0|1}<eos>`.

    (The shared `tiny_models` fixture is richer but takes minutes on a busy CPU; this one takes seconds.)
    """
    import random

    import torch

    from corl.studies.tiny.families import build_random_model
    from corl.studies.tiny.tokenizers import char_tokenizer

    tok = char_tokenizer()
    model = build_random_model("llama", tok, hidden=32, layers=1, heads=2, ffn=64, seed=0)
    problems = [r["problem"] for r in TINY_ROWS] + ["in a shop, " + r["problem"] for r in TINY_ROWS] + ["3+4=?", "7*8=?"]
    rng = random.Random(0)
    opt = torch.optim.AdamW(model.parameters(), lr=2e-2)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a model this small trains faster on one thread
    try:
        for _ in range(30):
            texts = [p + "\n\\boxed{" + str(rng.randint(0, 1)) + "}" + tok.eos_token for p in rng.choices(problems, k=8)]
            enc = tok(texts, return_tensors="pt", padding=True, add_special_tokens=False)
            loss = model(**enc, labels=enc["input_ids"].masked_fill(enc["attention_mask"] == 0, -100)).loss
            opt.zero_grad()
            loss.backward()
            opt.step()
    finally:
        torch.set_num_threads(threads)
    path = tmp_path_factory.mktemp("solver")
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path


def hf_args(model_dir: Path, data: Path, out: Path, *extra: str) -> list[str]:
    return [
        "rephrase", str(data), "-o", str(out), "--backend", "hf", "--model", str(model_dir), "--device", "cpu",
        "--instruction", "{problem}", "--temperature", "0", "--batch-size", "2", *extra,
    ]  # fmt: skip


def test_hf_backend_rewrites_with_a_tiny_model(solver_dir, tmp_path):
    data = write_jsonl(tmp_path / "data.jsonl", TINY_ROWS)
    out = tmp_path / "out.jsonl"
    result = CliRunner().invoke(app, hf_args(solver_dir, data, out, "--max-tokens", "24"))
    assert result.exit_code == 0, result.output
    written = read_jsonl(out)
    assert [r["id"] for r in written] == [r["id"] for r in TINY_ROWS]
    assert all(isinstance(r["problem_rephrased"], str) and r["problem_rephrased"] for r in written)
    assert {rec["model"] for rec in read_jsonl(journal_path(out))} == {str(solver_dir)}


def test_hf_backend_reports_cut_off_rewrites_as_failures(solver_dir, tmp_path):
    data = write_jsonl(tmp_path / "data.jsonl", TINY_ROWS)
    out = tmp_path / "out.jsonl"
    result = CliRunner().invoke(app, hf_args(solver_dir, data, out, "--max-tokens", "1"))
    assert result.exit_code == 1, result.output
    assert "3 rows failed (ids: t0, t1, t2)" in result.output and not out.exists()
    assert re.search(r"row t0: the (rewrite was cut off|model wrote an empty)", result.output)


class StubEngine:
    """Answers each prompt with scripted completions (cycled to K); records the calls."""

    def __init__(self, script: dict[str, list[str]]):
        self.script, self.calls = script, []

    def generate(self, prompts, num_samples, params):
        from types import SimpleNamespace

        self.calls.append((list(prompts), num_samples))
        texts = [self.script[p][k % len(self.script[p])] for p in prompts for k in range(num_samples)]
        return SimpleNamespace(texts=texts)


def test_answer_agreement_by_hand():
    from corl.studies.rephrase import answer_agreement

    box = "so \\boxed{{{}}}".format
    engine = StubEngine({
        "x": [box(4), box(4), box(5)], "x'": [box(4), box(3), box(4)],  # majorities 4 and 4: agree
        "y": [box(1), box(2), box(2)], "y'": [box(1), box(1), box(2)],  # 2 vs 1: disagree
        "z": ["no answer"], "z'": [box(7)],  # no majority on one side: not agreeing
        "w": [box("0.5")], "w'": [box("\\frac{1}{2}")],  # equivalent answers agree
    })  # fmt: skip
    rows = answer_agreement(engine, ["x", "y", "z", "w"], ["x'", "y'", "z'", "w'"], ["X", "Y", "Z", "W"], 3, None, batch_size=3)
    assert [(r.id, r.original_answer, r.rephrased_answer, r.agree) for r in rows] == [
        ("X", "4", "4", True), ("Y", "2", "1", False), ("Z", None, "7", False), ("W", "0.5", "\\frac{1}{2}", True),
    ]  # fmt: skip
    assert rows[0].original_share == pytest.approx(2 / 3) and rows[2].original_share == 0.0
    assert engine.calls == [(["x", "x'", "y", "y'", "z", "z'"], 3), (["w", "w'"], 3)]  # both wordings share a call


def test_check_solves_both_wordings_with_a_tiny_model(server, solver_dir, tmp_path):
    data = write_jsonl(tmp_path / "data.jsonl", TINY_ROWS)
    out = tmp_path / "out.jsonl"
    args = cli_args(server, data, out, "--check", "--check-model", str(solver_dir), "--device", "cpu",
                    "--check-samples", "4", "--check-max-tokens", "12", "--check-template", r"{problem}\n",
                    "--check-instruction", "", "--batch-size", "2", "--check-rows", "2")  # fmt: skip
    result = CliRunner().invoke(app, args, env={"FAKE_API_KEY": SECRET})
    assert result.exit_code == 0, result.output
    assert re.search(r"answer check \(.*K=4\): majority answers agree on \d+/\d+ rows", result.output)
    report = read_jsonl(tmp_path / "out.check.jsonl")
    assert len(report) == 2 and {r["id"] for r in report} <= {"t0", "t1", "t2"}
    assert set(report[0]) == {
        "id",
        "original_answer",
        "rephrased_answer",
        "original_share",
        "rephrased_share",
        "agree",
        "dropped_numbers",
    }
    assert any(r["original_answer"] is not None for r in report)  # the tiny model writes \boxed{d}
