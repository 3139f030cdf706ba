"""The paper's evaluation protocol in one call: declared benchmarks, named suites,
resumable cells, 95% intervals, a pooled-vote row (see docs/evaluation.md).

    from corl.evaluation.suite import effective, resolve_suite, run_suite
    benches = effective(resolve_suite("paper-text"), default_data_root(), limit=3)
    run_suite("paper-text", benches, ["runs/a/final", "runs/b/final"], Path("suite-out"))

* `protocol`: the table (`BENCHMARKS`), the suites (`SUITES`), overrides.
* `graders`: problems, prompts and verdicts (math answer, boxed MCQ letter, code tests).
* `stats`: the bootstrap, exactly as documented there.
* `runner` / `run`: cells written atomically, reused on resume; `report`: table and JSON.
* `external`: LiveCodeBench through its own harness when installed.
"""

from corl.evaluation.suite.external import NotRun
from corl.evaluation.suite.protocol import (
    BENCHMARKS,
    SUITES,
    Benchmark,
    ProtocolError,
    default_data_root,
    effective,
    parse_data_overrides,
    resolve_suite,
)
from corl.evaluation.suite.run import SuiteOutcome, run_suite

__all__ = [
    "BENCHMARKS",
    "SUITES",
    "Benchmark",
    "NotRun",
    "ProtocolError",
    "SuiteOutcome",
    "default_data_root",
    "effective",
    "parse_data_overrides",
    "resolve_suite",
    "run_suite",
]
