"""The code task kind: a completion's answer is its program's behaviour, judged where the program
cannot reach the verdict (docs/architecture.md, "Code judging").

- `task`: the `code` task kind and its `code:` data source (what the vote may see of a row).
- `programs`: a completion's code, its program, its public inputs (pure functions).
- `inputs`: public inputs derived from the shown calls by type-preserving mutation.
- `prompts`: HumanEval / MBPP rows and lm-evaluation-harness's prompts for them.
- `execute`: runs a program in the sandbox against the judge; `judge`: the judge process
  (standard library only, started by path); `stub`: the program's main.py; `wire`: the plain
  data that crosses between them; `values`: the judge's canonical values and records.
- `plus`: EvalPlus's extra tests (MBPP+).

Imported by the tasks registry, evaluation and the rewards; imports the sandbox and answers.
"""
