"""Rewording a dataset's problems while keeping their answers, for data decoupling.

Co-RL agents may read the same rows through different wordings: one agent the original
`problem`, another a rewrite in `problem_rephrased` (the paper rewrote MATH problems into
concrete real-world scenarios about twice as long, answers and row order unchanged). This
module writes such a field with a chat model behind an OpenAI-compatible endpoint or with
a local Hugging Face model, and checks that the rewrites kept the answers.

Output and resume (what `corl rephrase` relies on):
  * Every finished row is appended to a journal `<output>.journal.jsonl`, one line
    `{"id", "source_sha", "instruction_sha", "model", "text"}`, flushed and fsynced before
    the next row is written. Only the main thread writes it.
  * On start the journal is read back. A torn last line (a crash mid-write) is cut off
    and its row redone. A row counts as done only while its source text hashes the same,
    so an edited input row is redone; a journal written with another instruction is
    refused rather than mixed with new rewrites.
  * When every row is done, `<output>` is written in one go (temp file, fsync, rename):
    the input rows in input order, all fields kept, the rewrite in a new field. While
    any row has failed `<output>` is not written (never a file with holes); the journal
    keeps the finished rows and a rerun does only the rest. The journal stays after
    success: it makes a rerun free and records which model wrote each row.
"""

from __future__ import annotations

import dataclasses
import email.utils
import hashlib
import http.client
import json
import os
import random
import re
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path

DEFAULT_REPHRASE_INSTRUCTION = (
    "Rewrite the math problem you are given as a concrete real-world scenario, about twice as long as the original. "
    "Keep every number, quantity and condition of the original exactly, so that the answer stays the same, "
    "and keep formulas as they are. Ask for the same quantity as the original. "
    "Do not solve the problem and do not add hints. Output only the rewritten problem."
)

Messages = list[dict[str, str]]


class RephraseError(ValueError):
    """Input or state that rephrasing cannot use; the message says what to do."""


class RequestFailed(Exception):
    """One row's request failed for good (after retries, or with a non-retryable status)."""


class FatalRequestError(Exception):
    """A failure every row would hit (bad key, unknown model or URL): the run stops."""


# ---------------------------------------------------------------------------- prompts


def build_messages(problem: str, instruction: str = DEFAULT_REPHRASE_INSTRUCTION) -> Messages:
    """Chat messages asking for one rewrite of `problem`.

    An instruction containing `{problem}` is a user-message template, filled by plain
    replacement (LaTeX braces in problems are safe); otherwise the instruction is the
    system message and the problem is the user message.
    """
    if "{problem}" in instruction:
        return [{"role": "user", "content": instruction.replace("{problem}", problem)}]
    return [{"role": "system", "content": instruction}, {"role": "user", "content": problem}]


def render_chat(messages: Messages, tokenizer) -> str:
    """Prompt text for a local model: its chat template if it has one, else plain paragraphs."""
    if getattr(tokenizer, "chat_template", None):
        return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return "\n\n".join(m["content"] for m in messages) + "\n\n"


_THINK_BLOCK = re.compile(r"^\s*<think>.*?</think>", re.DOTALL)


def clean_rewrite(text: str) -> str:
    """The rewrite without a leading <think>...</think> block and surrounding whitespace."""
    return _THINK_BLOCK.sub("", text, count=1).strip()


# ------------------------------------------------------------------ dropped numbers

# "1,234.5" (thousands groups of exactly three digits), "42", "3.14", ".5"; "1,2,3" is three numbers.
_NUMBER = re.compile(r"(?<!\d)(?:\d{1,3}(?:,\d{3})+(?!\d|,\d)|\d+)(?:\.\d+)?|(?<![\d.])\.\d+")
_UNIT_WORDS = [
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
]
_TENS_WORDS = ["twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]
_SCALE_WORDS = {"dozen": 12, "hundred": 100, "thousand": 1000, "million": 1_000_000}
_WORD_NUMBER = re.compile(
    r"\b(?:(?P<tens>" + "|".join(_TENS_WORDS) + r")(?:[-\s]+(?P<unit_after>" + "|".join(_UNIT_WORDS[1:10]) + r"))?"
    r"|(?P<unit>" + "|".join(_UNIT_WORDS) + r")|(?P<scale>" + "|".join(_SCALE_WORDS) + r"))\b",
    re.IGNORECASE,
)


def _canonical_number(token: str) -> str:
    """'1,000' -> '1000', '3.50' -> '3.5', '007' -> '7', '.5' -> '0.5'."""
    try:
        return format(Decimal(token.replace(",", "")).normalize(), "f")
    except InvalidOperation:  # pragma: no cover - the regex only matches decimal numerals
        return token


def numbers_in(text: str) -> list[str]:
    """Distinct numbers written with digits in `text`, canonical, in order of first appearance."""
    return list(dict.fromkeys(_canonical_number(m.group()) for m in _NUMBER.finditer(text)))


def spelled_numbers(text: str) -> set[str]:
    """Numbers written as English words ("three", "twenty-five", "a dozen"), canonical."""
    found: set[str] = set()
    for m in _WORD_NUMBER.finditer(text):
        if m.group("tens"):
            value = 20 + 10 * _TENS_WORDS.index(m.group("tens").lower())
            if m.group("unit_after"):
                value += _UNIT_WORDS.index(m.group("unit_after").lower())
        elif m.group("unit"):
            value = _UNIT_WORDS.index(m.group("unit").lower())
        else:
            value = _SCALE_WORDS[m.group("scale").lower()]
        found.add(str(value))
    return found


def dropped_numbers(original: str, rewrite: str) -> list[str]:
    """Numbers in the original problem that the rewrite no longer contains.

    Pure text check: a number counts as kept when the rewrite has it in digits (any
    thousands separators or trailing zeros) or spelled out in English ("three",
    "twenty-five", "dozen"). Signs are ignored. "1/2" rewritten as "half" is flagged: the
    check is a pointer for review, not a verdict.
    """
    kept = set(numbers_in(rewrite)) | spelled_numbers(rewrite)
    return [n for n in numbers_in(original) if n not in kept]


# ---------------------------------------------------------------------------- journal


def text_sha(text: str) -> str:
    """Short content hash that ties a journal entry to the text it was made from."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def journal_path(output: Path) -> Path:
    return output.with_name(output.name + ".journal.jsonl")


@dataclass(frozen=True)
class JournalEntry:
    """One finished row: the rewrite and hashes of what it was made from."""

    source_sha: str
    instruction_sha: str
    model: str
    text: str


class RewriteJournal:
    """Append-only record of finished rows, one fsynced JSON line each (see module doc)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.torn_lines = 0  # unreadable lines dropped when reading
        self._file = None

    def read(self) -> dict[str, JournalEntry]:
        """Entries by row id (the last one wins); cuts a torn tail off the file first."""
        if not self.path.exists():
            return {}
        data = self.path.read_bytes()
        end = data.rfind(b"\n") + 1
        if end < len(data):  # a crash mid-write left a line without its newline
            with self.path.open("r+b") as f:
                f.truncate(end)
                f.flush()
                os.fsync(f.fileno())
            self.torn_lines += 1
        entries: dict[str, JournalEntry] = {}
        for line in data[:end].splitlines():
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
                entries[str(rec["id"])] = JournalEntry(rec["source_sha"], rec["instruction_sha"], rec["model"], rec["text"])
            except (ValueError, KeyError, TypeError):
                self.torn_lines += 1
        return entries

    def append(self, row_id, entry: JournalEntry) -> None:
        """Write one finished row durably: it survives a crash right after this returns."""
        if self._file is None:
            created = not self.path.exists()
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = self.path.open("a", encoding="utf-8")
            if created:
                _fsync_dir(self.path.parent)
        rec = {"id": row_id, "source_sha": entry.source_sha, "instruction_sha": entry.instruction_sha}
        rec |= {"model": entry.model, "text": entry.text}
        self._file.write(json.dumps(rec, ensure_ascii=False) + "\n")
        self._file.flush()
        os.fsync(self._file.fileno())

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # pragma: no cover - directories cannot be opened on Windows
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _jsonable(value):
    """json.dumps fallback for values from Parquet/HF datasets (numpy scalars and arrays, dates)."""
    if hasattr(value, "tolist"):
        return value.tolist()
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return str(value)


def write_rows_atomically(rows: Sequence[dict], output: Path) -> None:
    """Write JSONL rows to `output` all or nothing: temp file, fsync, rename."""
    tmp = output.with_name(output.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False, default=_jsonable) + "\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, output)
    _fsync_dir(output.parent)


# ------------------------------------------------------------------------ HTTP backend


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds to wait from a Retry-After header (delta-seconds or HTTP date); None if absent/invalid."""
    if value is None or not value.strip():
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def backoff_delay(attempt: int, base: float, cap: float, rng: random.Random) -> float:
    """Exponential backoff with jitter before retry `attempt` (1, 2, ...): base*2^(attempt-1), halved at random, capped."""
    return min(cap, base * 2 ** (attempt - 1)) * rng.uniform(0.5, 1.0)


class MalformedResponse(Exception):
    """A 200 answer that is not a chat completion (bad JSON, missing fields, empty text)."""


def parse_chat_completion(payload: bytes) -> tuple[str, str | None]:
    """(rewrite text, finish_reason) of a /chat/completions answer; MalformedResponse if it is none."""
    try:
        data = json.loads(payload)
        choice = data["choices"][0]
        content = choice["message"]["content"]
    except (ValueError, KeyError, IndexError, TypeError) as err:
        raise MalformedResponse(f"malformed response ({type(err).__name__}): {payload[:120]!r}") from None
    if not isinstance(content, str):
        raise MalformedResponse(f"response has no text content: {json.dumps(choice)[:200]}")
    text = clean_rewrite(content)
    if not text:
        raise MalformedResponse("response text is empty")
    return text, choice.get("finish_reason")


FATAL_STATUSES = {401: "check the API key", 403: "check the API key's permissions", 404: "check --base-url and --model"}


def _retryable(status: int) -> bool:
    return status in (408, 409, 425, 429) or status >= 500


class OpenAIChatClient:
    """POST {base_url}/chat/completions, with retries; safe to call from many threads.

    Retried, with exponential backoff and jitter (`Retry-After` honoured up to
    `max_delay`): HTTP 408/409/425/429/5xx, timeouts, connection errors, and malformed
    200 answers (bad JSON, no text: a proxy or an overloaded server can return those).
    Fatal for the whole run: 401/403/404. Failed for the row without retry: other 4xx,
    and a rewrite cut off by `max_tokens`. The API key goes only into the Authorization
    header; it is scrubbed from every error message and never part of repr().
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        *,
        timeout: float = 120.0,
        max_retries: int = 6,
        base_delay: float = 1.0,
        max_delay: float = 60.0,
        temperature: float = 0.7,
        max_tokens: int = 1024,
        extra_body: dict | None = None,
        seed: int | None = None,
    ):
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        self._api_key = api_key or None
        self.timeout, self.max_retries = timeout, max_retries
        self.base_delay, self.max_delay = base_delay, max_delay
        self.body = {"model": model, "temperature": temperature, "max_tokens": max_tokens} | (extra_body or {})
        self.body = {k: v for k, v in self.body.items() if v is not None}  # extra_body may delete keys with null
        self.stop = threading.Event()  # set to make waiting retries give up
        self._rng = random.Random(seed)
        self._rng_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"OpenAIChatClient(url={self.url!r}, model={self.model!r})"

    def _scrub(self, text: str) -> str:
        return text.replace(self._api_key, "***") if self._api_key else text

    def _post(self, payload: bytes) -> tuple[int, dict, bytes]:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        request = urllib.request.Request(self.url, data=payload, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as resp:
                return resp.status, dict(resp.headers), resp.read()
        except urllib.error.HTTPError as err:
            with err:
                return err.code, dict(err.headers or {}), err.read()

    def complete(self, messages: Messages) -> str:
        """The model's answer to `messages`, cleaned; RequestFailed or FatalRequestError if none."""
        payload = json.dumps(self.body | {"messages": messages}).encode("utf-8")
        last_error, delay = "", 0.0
        for attempt in range(self.max_retries + 1):
            if attempt and self.stop.wait(delay):
                raise RequestFailed(f"cancelled while retrying ({last_error})")
            try:
                status, headers, body = self._post(payload)
            except (OSError, http.client.HTTPException) as err:  # timeouts, refused/reset connections, bad HTTP
                last_error = self._scrub(f"{type(err).__name__}: {err}")
                delay = self._backoff(attempt + 1)
                continue
            if status == 200:
                try:
                    text, finish = parse_chat_completion(body)
                except MalformedResponse as err:
                    last_error = self._scrub(str(err))
                    delay = self._backoff(attempt + 1)
                    continue
                if finish == "length":
                    raise RequestFailed("the rewrite was cut off by the token limit; raise --max-tokens")
                return text
            snippet = self._scrub(body[:200].decode("utf-8", "replace"))
            if status in FATAL_STATUSES:
                raise FatalRequestError(f"HTTP {status} from {self.url} ({FATAL_STATUSES[status]}): {snippet}")
            if not _retryable(status):
                raise RequestFailed(f"HTTP {status}: {snippet}")
            last_error = f"HTTP {status}: {snippet}"
            retry_after = parse_retry_after({k.lower(): v for k, v in headers.items()}.get("retry-after"))
            delay = min(retry_after, self.max_delay) if retry_after is not None else self._backoff(attempt + 1)
        raise RequestFailed(f"gave up after {self.max_retries + 1} attempts; last error: {last_error}")

    def _backoff(self, attempt: int) -> float:
        with self._rng_lock:
            return backoff_delay(attempt, self.base_delay, self.max_delay, self._rng)


# -------------------------------------------------------------------------- rewriters

Outcome = tuple[int, str | None, str | None]  # (job index, rewrite or None, error or None)
Rewriter = Callable[[list[Messages]], Iterator[Outcome]]  # jobs -> outcomes, in completion order


def http_rewriter(client: OpenAIChatClient, concurrency: int = 8) -> Rewriter:
    """Rewrites through an OpenAI-compatible endpoint, `concurrency` requests at a time."""

    def run(jobs: list[Messages]) -> Iterator[Outcome]:
        client.stop.clear()
        pool = ThreadPoolExecutor(max_workers=max(1, concurrency), thread_name_prefix="rephrase")
        try:
            futures = {pool.submit(client.complete, messages): i for i, messages in enumerate(jobs)}
            for future in as_completed(futures):
                try:
                    yield futures[future], future.result(), None
                except RequestFailed as err:
                    yield futures[future], None, str(err)
        finally:
            client.stop.set()  # waiting retries give up; queued requests are cancelled
            pool.shutdown(wait=False, cancel_futures=True)

    return run


def hf_rewriter(model, tokenizer, temperature: float = 0.7, max_new_tokens: int = 1024, batch_size: int = 8) -> Rewriter:
    """Rewrites with a local Hugging Face model through corl's rollout engine, in batches."""
    import torch

    from corl.rollout import HFGenerateEngine, SamplingParams

    chat = bool(getattr(tokenizer, "chat_template", None))
    engine = HFGenerateEngine(model, tokenizer, add_special_tokens=not chat)  # a chat template writes its own BOS
    eos_ids = torch.tensor(engine.eos_ids)
    params = SamplingParams(temperature=temperature, top_p=1.0, max_new_tokens=max_new_tokens)

    def run(jobs: list[Messages]) -> Iterator[Outcome]:
        for start in range(0, len(jobs), batch_size):
            chunk = jobs[start : start + batch_size]
            rollout = engine.generate([render_chat(m, tokenizer) for m in chunk], 1, params)
            cut_off = ~torch.isin(rollout.completion_ids.cpu(), eos_ids).any(1)  # [B] no EOS within the budget
            for j, raw in enumerate(rollout.texts):
                text = clean_rewrite(raw)
                if cut_off[j]:
                    yield start + j, None, "the rewrite was cut off by the token limit; raise --max-tokens"
                elif not text:
                    yield start + j, None, "the model wrote an empty rewrite"
                else:
                    yield start + j, text, None

    return run


# ------------------------------------------------------------------------------ run


def row_ids(rows: Sequence[dict], id_field: str, source: str = "dataset") -> list[str]:
    """Row ids as strings (the row index where the id field is absent, as corl.data does); unique."""
    from corl.data import DataError
    from corl.data import row_ids as data_row_ids

    try:
        return data_row_ids(rows, source, id_field)
    except DataError as err:
        raise RephraseError(f"{err} (set --id-field)") from None


def source_texts(rows: Sequence[dict], field: str, source: str = "dataset") -> list[str]:
    """The text to rewrite of every row; an error naming the row if one has none."""
    texts = []
    for i, row in enumerate(rows):
        value = row.get(field)
        if not isinstance(value, str) or not value.strip():
            columns = ", ".join(sorted(row)) or "none"
            raise RephraseError(f"{source} row {i}: field {field!r} is missing or empty (columns: {columns}); set --field")
        texts.append(value)
    return texts


@dataclass
class RephraseReport:
    """What a run did: how many rows it reused and rewrote, which failed and why."""

    total: int  # rows in the input
    reused: int  # rows finished by an earlier run
    rewritten: int = 0  # rows finished by this run
    failures: dict[str, str] = dataclasses.field(default_factory=dict)  # row id -> last error
    stopped: str | None = None  # why the run stopped before trying every row
    output_written: bool = False

    @property
    def unfinished(self) -> int:
        return self.total - self.reused - self.rewritten


def rephrase_rows(
    rows: Sequence[dict],
    output: Path,
    rewriter: Rewriter,
    *,
    instruction: str = DEFAULT_REPHRASE_INSTRUCTION,
    field: str = "problem",
    id_field: str = "id",
    new_field: str = "problem_rephrased",
    model_name: str = "",
    source: str = "dataset",
    on_start: Callable[[int, int], None] | None = None,
    on_outcome: Callable[[str, str | None], None] | None = None,
) -> RephraseReport:
    """Rewrite `rows[*][field]` into `new_field`, resuming from `output`'s journal (see module doc).

    Args:
        on_start: called with (rows to do, rows already done) before the first request.
        on_outcome: called with (row id, error or None) after each row.
    """
    output = Path(output)
    if output.suffix != ".jsonl":
        raise RephraseError(f"output {str(output)!r} must be a .jsonl file")
    if new_field == field:
        raise RephraseError(f"--new-field {new_field!r} would overwrite the field being rewritten; choose another name")
    if any(new_field in row for row in rows):
        raise RephraseError(f"{source} already has a field {new_field!r}; choose another --new-field")
    ids = row_ids(rows, id_field, source)
    texts = source_texts(rows, field, source)
    instruction_sha = text_sha(instruction)

    journal = RewriteJournal(journal_path(output))
    done = journal.read()
    other = {e.instruction_sha for e in done.values()} - {instruction_sha}
    if other:
        raise RephraseError(
            f"journal {str(journal.path)!r} holds rewrites made with another instruction; "
            "write to a new --output, or delete the journal to start over"
        )
    rewrites = {rid: done[rid].text for rid, text in zip(ids, texts) if rid in done and done[rid].source_sha == text_sha(text)}
    todo = [i for i, rid in enumerate(ids) if rid not in rewrites]
    report = RephraseReport(total=len(rows), reused=len(rewrites))
    if on_start:
        on_start(len(todo), len(rewrites))

    outcomes = rewriter([build_messages(texts[i], instruction) for i in todo])
    try:
        for job, text, error in outcomes:
            i = todo[job]
            if text is not None:
                journal.append(ids[i], JournalEntry(text_sha(texts[i]), instruction_sha, model_name, text))
                rewrites[ids[i]] = text
                report.rewritten += 1
            else:
                report.failures[ids[i]] = error or "unknown error"
            if on_outcome:
                on_outcome(ids[i], error)
    except FatalRequestError as err:
        report.stopped = str(err)
    finally:
        getattr(outcomes, "close", lambda: None)()  # a generator's cleanup cancels pending requests
        journal.close()
    report.failures = {rid: report.failures[rid] for rid in ids if rid in report.failures}  # input order

    if len(rewrites) == len(rows):
        write_rows_atomically([row | {new_field: rewrites[rid]} for row, rid in zip(rows, ids)], output)
        report.output_written = True
    return report


# ---------------------------------------------------------------------------- checks


@dataclass(frozen=True)
class AgreementRow:
    """One row of the answer-preservation check: majority answers of both wordings."""

    id: str
    original_answer: str | None  # majority answer over K samples of the original wording
    rephrased_answer: str | None
    original_share: float  # share of the K samples behind that majority
    rephrased_share: float
    agree: bool


def majority_answer(completions: Sequence[str]):
    """corl.labels.Vote of the answers extracted from completions, or None if none has one."""
    from corl.answers import answer_key, extract_answer
    from corl.labels import majority_vote

    answers = [extract_answer(t) for t in completions]
    keys = [answer_key(a) if a is not None else None for a in answers]
    return majority_vote(keys, answers)


def answer_agreement(
    engine,
    prompts_a: Sequence[str],
    prompts_b: Sequence[str],
    ids: Sequence[str],
    samples: int,
    params,
    batch_size: int = 4,
    on_batch: Callable[[int], None] | None = None,
) -> list[AgreementRow]:
    """Solve both wordings K times each with `engine` and compare the majority answers.

    Both wordings of a row share one generate call (prompts [a_1, b_1, a_2, b_2, ...]),
    so the two sides of a comparison always see the same model and sampling settings.

    Args:
        engine: a corl.rollout engine; texts come back grouped by prompt ([2B*K]).
        on_batch: called with the number of rows finished after each generate call.
    """
    from corl.answers import is_equivalent

    result: list[AgreementRow] = []
    for start in range(0, len(ids), batch_size):
        stop = min(start + batch_size, len(ids))
        prompts = [p for i in range(start, stop) for p in (prompts_a[i], prompts_b[i])]
        texts = engine.generate(prompts, samples, params).texts  # [2B*K], grouped by prompt
        for j, i in enumerate(range(start, stop)):
            va = majority_answer(texts[(2 * j) * samples : (2 * j + 1) * samples])
            vb = majority_answer(texts[(2 * j + 1) * samples : (2 * j + 2) * samples])
            agree = (
                va is not None
                and vb is not None
                and (va.key == vb.key or is_equivalent(va.answer, vb.answer) or is_equivalent(vb.answer, va.answer))
            )  # is_equivalent reads (prediction, gold); neither wording is the gold here
            result.append(
                AgreementRow(
                    id=ids[i],
                    original_answer=va.answer if va else None,
                    rephrased_answer=vb.answer if vb else None,
                    original_share=va.agreement if va else 0.0,
                    rephrased_share=vb.agreement if vb else 0.0,
                    agree=agree,
                )
            )
        if on_batch:
            on_batch(stop - start)
    return result


def sample_indices(num_rows: int, limit: int | None, seed: int = 0) -> list[int]:
    """All row indices, or a seeded random sample of `limit` of them in row order."""
    if not limit or limit >= num_rows:
        return list(range(num_rows))
    return sorted(random.Random(seed).sample(range(num_rows), limit))
