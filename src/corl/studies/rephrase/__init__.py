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

Modules: `prompts` (the messages sent), `client` (OpenAI-compatible endpoints through the
`openai` SDK), `local` (a local Hugging Face model), `journal` (the journal and the output
write), `run` (`rephrase_rows`), `checks` (dropped numbers, answer agreement).
"""

from corl.studies.rephrase.checks import (
    AgreementRow,
    answer_agreement,
    dropped_numbers,
    majority_answer,
    numbers_in,
    sample_indices,
    spelled_numbers,
)
from corl.studies.rephrase.client import FatalRequestError, OpenAIChatClient, RequestFailed, http_rewriter
from corl.studies.rephrase.journal import JournalEntry, RewriteJournal, journal_path, text_sha, write_rows_atomically
from corl.studies.rephrase.local import hf_rewriter
from corl.studies.rephrase.prompts import (
    DEFAULT_REPHRASE_INSTRUCTION,
    Messages,
    Outcome,
    Rewriter,
    build_messages,
    clean_rewrite,
    render_chat,
)
from corl.studies.rephrase.run import RephraseError, RephraseReport, rephrase_rows, row_ids, source_texts

__all__ = [
    "DEFAULT_REPHRASE_INSTRUCTION",
    "AgreementRow",
    "FatalRequestError",
    "JournalEntry",
    "Messages",
    "OpenAIChatClient",
    "Outcome",
    "RephraseError",
    "RephraseReport",
    "RequestFailed",
    "RewriteJournal",
    "Rewriter",
    "answer_agreement",
    "build_messages",
    "clean_rewrite",
    "dropped_numbers",
    "hf_rewriter",
    "http_rewriter",
    "journal_path",
    "majority_answer",
    "numbers_in",
    "rephrase_rows",
    "render_chat",
    "row_ids",
    "sample_indices",
    "source_texts",
    "spelled_numbers",
    "text_sha",
    "write_rows_atomically",
]
