"""Scores of models and of other tools' files, with the numbers papers report.

- `evaluate`: greedy accuracy, avg@k, maj@k, pass@k and the pooled vote on problems with answers.
- `code_eval`: pass@k of programs judged in the sandbox (HumanEval / MBPP, EvalPlus's extra tests).
- `grade`, `grade_formats`: `corl grade FILE`, completions from any generator, in its own shape.
- `run_targets`: what `corl eval` evaluates (named models, or every agent of a run's checkpoint).
- `suite`: `corl suite`, the paper's benchmark protocol (datasets, graders, bootstrap intervals).

Imported by the CLI and the studies only; imports answers, labels, tasks, rollout, models,
data, checkpoints and the sandbox. Nothing in training depends on it.
"""
