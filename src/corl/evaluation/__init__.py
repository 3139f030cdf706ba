"""Scores of models and of other tools' files, with the numbers papers report.

- `evaluate`: greedy accuracy, avg@k, maj@k, pass@k and the pooled vote on problems with answers; standard
  errors and 95% intervals over problems.
- `code_eval`: pass@k of programs judged in the sandbox (HumanEval / MBPP, EvalPlus's extra tests).
- `grade` and `grade_*`: `corl grade FILE`, completions from any generator, in its own shape: `grade_files`
  (files, W&B tables, folders), `grade_formats` (where the text is; which tool wrote it), `grade_groups` (which
  rows are one problem), `grade_join` (the gold of `--answers`), `grade_run` (put together).
- `run_targets`: what `corl eval` evaluates (named models, or every agent of a run's checkpoint).
- `suite`: `corl suite`, the paper's benchmark protocol (datasets, graders, bootstrap intervals).

Imported by the CLI and the studies only; imports answers, labels, tasks, rollout, models,
data, checkpoints and the sandbox. Nothing in training depends on it.
"""
