"""One rephrasing run: which rows to do, journal them as they finish, write the output when all are done."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from corl.studies.rephrase.client import FatalRequestError
from corl.studies.rephrase.journal import JournalEntry, RewriteJournal, journal_path, text_sha, write_rows_atomically
from corl.studies.rephrase.prompts import DEFAULT_REPHRASE_INSTRUCTION, Rewriter, build_messages


class RephraseError(ValueError):
    """Input or state that rephrasing cannot use; the message says what to do."""


def row_ids(rows: Sequence[dict], id_field: str, source: str = "dataset") -> list[str]:
    """Row ids as strings (the row index where the id field is absent, as corl.data.rows does); unique."""
    from corl.data.rows import DataError
    from corl.data.rows import row_ids as data_row_ids

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
            raise RephraseError(f"{source} row {i + 1}: field {field!r} is missing or empty (columns: {columns}); set --field")
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
