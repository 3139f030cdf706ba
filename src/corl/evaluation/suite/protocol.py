"""The evaluation protocol, declared once: one row per benchmark, named suites of rows.

Every figure the suite reports comes from exactly one `Benchmark` row: the data, the
prompt, the sampling (samples per seed, temperature, top-p, token budget), the seeds,
the metric and the grader. Suites only name rows, so a benchmark shared by two suites
(AMC in `paper-text` and in `math`) is the same cell and is computed once per checkpoint.

Graders:
* ``math``: the final answer (`corl.answers.extract_answer`) against the gold answer
  (`is_equivalent`).
* ``mcq``: the last ``\\boxed{A-D}`` letter against the gold letter (GPQA, the CoMAS /
  Co-RL convention); choices shuffled per (seed, problem), see `corl.evaluation.suite.graders`.
* ``code``: the program lm-eval would test (`corl.evaluation.code_eval.program_for`), run with the
  hidden tests in corl's sandbox.
* ``lcb``: LiveCodeBench's own harness (`lcb_runner`), when installed.
* ``vision``: image math benchmarks (MathVista, MathVerse, MathVision, We-Math) read in
  their own published fields (`corl.vision.datasets`, ``format``); a vision-language
  checkpoint sees the images; the picked option's letter (a letter, "(C)", "option C" or
  the option's value) against the gold letter, free-form answers by `is_equivalent`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

from corl.config.sections import DEFAULT_INSTRUCTION  # not corl.config: its suite section reads this module
from corl.data.rows import LOCAL_SUFFIXES

GRADERS = ("math", "mcq", "code", "lcb", "vision")
PAPER_SAMPLING = {"temperature": 0.6, "top_p": 0.95, "max_tokens": 3072}  # the paper's Table 1 decoding
DATA_ROOT_ENV = "CORL_BENCHMARK_DATA"


@dataclass(frozen=True)
class Benchmark:
    """One benchmark's protocol; `data` is relative to the data root unless absolute or a HF name."""

    name: str  # the key used by --data NAME=PATH and in file names
    title: str  # the table's column header
    data: str
    grader: str
    template: str = "{problem}\n{instruction}"  # math / mcq prompt; code benchmarks use `code_style`
    instruction: str = DEFAULT_INSTRUCTION
    chat: bool = False  # wrap the prompt in the checkpoint's chat template
    samples: int = 1  # k completions per problem and seed
    seeds: tuple[int, ...] = (0, 1, 2)
    temperature: float = PAPER_SAMPLING["temperature"]
    top_p: float = PAPER_SAMPLING["top_p"]
    max_tokens: int = PAPER_SAMPLING["max_tokens"]
    extract: str = "strict"  # math answer extraction mode (corl.answers.EXTRACTION_MODES)
    code_style: str | None = None  # corl.evaluation.code_eval style without chat (its _instruct twin with chat)
    fewshot: str | None = None  # MBPP: the file of the three lm-eval shots (task_ids 2, 3, 4)
    split: str = "test"  # for Hugging Face names
    limit: int | None = None  # first N problems (smoke runs); None = all
    data_sha: str | None = None  # content hash of a local data file: an edited file is a new cell
    format: str | None = None  # vision: the dataset's own record format (corl.vision.datasets)
    note: str = ""

    @property
    def metric(self) -> str:
        """The headline figure: mean correctness of k samples, averaged over the seeds."""
        return "pass@1" if self.grader in ("code", "lcb") else f"avg@{self.samples}"

    def as_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["seeds"] = list(self.seeds)
        d["metric"] = self.metric
        return d

    def fingerprint(self) -> str:
        """Hash of everything that changes the cell's numbers (the title and note do not)."""
        d = {k: v for k, v in self.as_dict().items() if k not in ("title", "note")}
        return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:16]


_MATH_NOTE = "0-shot, \\boxed{} instruction (the training prompt), math-verify equivalence"

BENCHMARKS: dict[str, Benchmark] = {
    b.name: b
    for b in (
        Benchmark(
            "gsm8k",
            "GSM8K",
            "gsm8k/test.jsonl",
            "math",
            extract="flexible",
            note="0-shot boxed prompt; flexible extraction (else the last number), as the paper's flexible-extract",
        ),
        Benchmark("math500", "MATH-500", "math500/test.jsonl", "math", note=_MATH_NOTE),
        Benchmark("amc23", "AMC", "amc23/test.jsonl", "math", samples=8, note="40 problems: avg@8 per seed"),
        Benchmark("aime24", "AIME 2024", "aime24/test.jsonl", "math", samples=8, note="30 problems: avg@8 per seed"),
        Benchmark("aime25", "AIME 2025", "aime25/test.jsonl", "math", samples=8, note="30 problems: avg@8 per seed"),
        Benchmark("minerva_math", "Minerva", "minerva_math/test.jsonl", "math", note=_MATH_NOTE),
        Benchmark("olympiadbench", "OlympiadBench", "olympiadbench/test.jsonl", "math", note=_MATH_NOTE),
        Benchmark(
            "humaneval",
            "HumanEval",
            "humaneval/test.jsonl",
            "code",
            template="",
            code_style="humaneval",
            note="lm-eval humaneval (humaneval_instruct with chat); hidden tests in corl's sandbox",
        ),
        Benchmark(
            "mbpp",
            "MBPP",
            "mbpp/test.jsonl",
            "code",
            template="",
            code_style="mbpp",
            fewshot="mbpp/prompt.jsonl",
            note="lm-eval mbpp, 3-shot (mbpp_instruct with chat); 500 test tasks 11-510",
        ),
        Benchmark(
            "lcb",
            "LiveCodeBench",
            "release_v6",
            "lcb",
            template="",
            seeds=(0,),
            note="LiveCodeBench's own harness (lcb_runner, code generation, release_v6); not run without it",
        ),
        Benchmark(
            "gpqa",
            "GPQA-D",
            "gpqa/diamond.jsonl",
            "mcq",
            instruction="Please reason step by step, and put the letter of your final answer within \\boxed{}.",
            note="gated, not shipped: --data gpqa=FILE; last \\boxed{letter}",
        ),
        *(
            Benchmark(
                name,
                title,
                f"{name}/testmini.jsonl",
                "vision",
                chat=True,
                samples=1,
                seeds=(0,),
                temperature=0.0,
                top_p=1.0,
                max_tokens=2048,
                format=name,
                note=f"greedy, as the paper's VLM evaluation; {hub} testmini exported to the local layout (docs/vision.md)",
            )
            for name, title, hub in (
                ("mathvista", "MathVista", "AI4Math/MathVista"),
                ("mathverse", "MathVerse", "AI4Math/MathVerse"),
                ("mathvision", "MathVision", "MathLLMs/MathVision"),
                ("wemath", "We-Math", "We-Math/We-Math"),
            )
        ),
    )
}

SUITES: dict[str, tuple[str, ...]] = {
    "paper-text": ("gsm8k", "math500", "amc23", "humaneval", "mbpp", "lcb", "gpqa"),
    "paper-vision": ("mathvista", "mathverse", "mathvision", "wemath"),
    "math": ("aime24", "aime25", "amc23", "math500", "minerva_math", "olympiadbench"),
    "code": ("humaneval", "mbpp"),
}


class ProtocolError(ValueError):
    """An unknown suite or benchmark, or a malformed override; the message names the option."""


def resolve_suite(spec: str) -> list[Benchmark]:
    """A suite name, or benchmark names joined by commas (`amc23,humaneval` for a smoke run)."""
    names = SUITES.get(spec) or tuple(n.strip() for n in spec.split(",") if n.strip())
    unknown = [n for n in names if n not in BENCHMARKS]
    if unknown or not names:
        raise ProtocolError(
            f"--suite {spec!r}: unknown benchmark(s) {', '.join(unknown) or '(none given)'}; "
            f"suites: {', '.join(SUITES)}; benchmarks: {', '.join(BENCHMARKS)}"
        )
    return [BENCHMARKS[n] for n in names]


def parse_data_overrides(items: list[str], known: list[Benchmark]) -> dict[str, str]:
    """`--data gpqa=/path/file.jsonl` items -> {benchmark: path}."""
    out: dict[str, str] = {}
    names = {b.name for b in known}
    for item in items:
        name, sep, path = item.partition("=")
        if not sep or not path:
            raise ProtocolError(f"--data {item!r}: expected NAME=PATH, e.g. gpqa=/data/gpqa_diamond.jsonl")
        if name not in names:
            raise ProtocolError(f"--data {item!r}: {name!r} is not a benchmark of this suite ({', '.join(sorted(names))})")
        out[name] = path
    return out


def default_data_root() -> Path:
    """$CORL_BENCHMARK_DATA, else ./data when `corl data` wrote it (its MANIFEST.json; the same layout),
    else ../shared/data from the working directory, else beside the checkout."""
    if os.environ.get(DATA_ROOT_ENV):
        return Path(os.environ[DATA_ROOT_ENV]).expanduser()
    written = Path.cwd() / "data"
    if (written / "MANIFEST.json").is_file():
        return written
    here = Path.cwd().parent / "shared" / "data"
    if here.is_dir():
        return here
    return Path(__file__).resolve().parents[5] / "shared" / "data"


def resolve_data(bench: Benchmark, root: Path) -> str:
    """A local path (absolute, or under the data root) or a Hugging Face name, as given."""
    if bench.grader == "lcb":
        return bench.data  # a LiveCodeBench release name, read by lcb_runner itself
    p = Path(bench.data).expanduser()
    if p.is_absolute() or bench.data.startswith("."):
        return str(p.resolve())
    if bench.data.endswith(LOCAL_SUFFIXES):
        return str((root / p).resolve())
    return bench.data  # a Hugging Face dataset name


def effective(
    benches: list[Benchmark],
    data_root: Path,
    data: dict[str, str] | None = None,
    limit: int | None = None,
    seeds: tuple[int, ...] | None = None,
    max_tokens: int | None = None,
    chat: bool | None = None,
) -> list[Benchmark]:
    """The rows as this run uses them: data paths resolved, smoke-run overrides applied."""
    out = []
    for b in benches:
        given = (data or {}).get(b.name)
        if given is None:
            b = dataclasses.replace(b, data=resolve_data(b, data_root))
        elif Path(given).expanduser().exists() or given.endswith(LOCAL_SUFFIXES) or given.startswith((".", "/", "~")):
            b = dataclasses.replace(b, data=str(Path(given).expanduser().resolve()))  # --data paths start from the cwd
        else:
            b = dataclasses.replace(b, data=given)  # a Hugging Face dataset name
        if b.fewshot is not None:  # the shots stay the shipped ones when only the test file is replaced
            b = dataclasses.replace(
                b, fewshot=str((data_root / b.fewshot).resolve()) if not Path(b.fewshot).is_absolute() else b.fewshot
            )
        changes: dict = {}
        if limit is not None:
            changes["limit"] = limit
        if seeds is not None:
            changes["seeds"] = tuple(seeds)
        if max_tokens is not None:
            changes["max_tokens"] = max_tokens
        if chat is not None:
            changes["chat"] = chat
        if Path(b.data).is_file():
            changes["data_sha"] = hashlib.sha256(Path(b.data).read_bytes()).hexdigest()[:16]
        out.append(dataclasses.replace(b, **changes))
    return out


def protocol_markdown(benches: list[Benchmark] | None = None) -> str:
    """The protocol table as markdown (docs/evaluation.md carries it; a test keeps the two equal)."""
    head = "| name | column | data (default) | grader | chat | k | seeds | T | top-p | tokens | metric |"
    lines = [head, "| --- | --- | --- | --- | --- | ---: | --- | ---: | ---: | ---: | --- |"]
    for b in benches or list(BENCHMARKS.values()):
        grader = {
            "math": f"math answer ({b.extract})",
            "mcq": "last boxed letter",
            "code": f"code tests ({b.code_style})",
            "vision": f"picked option / math answer ({b.format})",
        }
        lines.append(
            f"| `{b.name}` | {b.title} | `{b.data}` | {grader.get(b.grader, 'lcb_runner')} | {'on' if b.chat else 'off'} "
            f"| {b.samples} | {','.join(map(str, b.seeds))} | {b.temperature} | {b.top_p} | {b.max_tokens} | {b.metric} |"
        )
    return "\n".join(lines) + "\n"
