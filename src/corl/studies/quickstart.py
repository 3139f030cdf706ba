"""The embedded default: a miniature of the paper's study that runs on a laptop CPU.

    corl quickstart                 # ~5 min on 2 cores, first run (pretraining) included (README, "Time")
    corl quickstart --json          # one JSON object with every measured number
    corl quickstart --seeds 3       # mean +- std over RL seeds
    corl quickstart --vision        # the same study with tiny vision-language agents on an image task

1. build (or load from cache) a cohort of tiny models from different families
   (corl.studies.tiny.families: architecture, tokenizer, pretraining mixture and slips, size, seed; with
   --vision, corl.studies.tiny_vl.families: a Qwen2-VL and a LLaVA/SigLIP model, different vision
   encoders, on corl.studies.tiny_vl.task, a number drawn in the image and arithmetic in the text);
2. measure error decoupling before any RL (kappa, c, w, u; corl.studies.diversity);
3. train every method under the same budget (steps x prompts x K per agent) through the
   same `CohortTrainer` that `corl train` runs: TTRL and GT-Reward for each agent alone,
   Co-RL for the pair, and whatever else --methods asks for;
4. evaluate on the held-out test split and write a report (corl.studies.report).

Nothing here knows the answers of a training prompt except the diagnostics and the
GT-Reward baseline, exactly as in `corl train`. The reported numbers are what was
measured, whatever they are.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

from corl.config import RolloutConfig, validate_config
from corl.data.rows import IMAGES_INPUT, Problem, build_problems, load_rows
from corl.evaluation.evaluate import accuracy_by_group, grade, sample_answers
from corl.rollout import SamplingParams, build_engine
from corl.studies.jobs import Jobs
from corl.studies.plugins import TINY_PROMPT, TINY_VL_PROMPT
from corl.studies.quickstart_cohort import build_cohort
from corl.studies.quickstart_methods import ESSENTIAL, METHODS, Method
from corl.studies.quickstart_options import QuickstartOptions
from corl.studies.quickstart_selection import evaluate_selected, greedy_test_accuracy, selection_logging
from corl.studies.quickstart_summary import summarize
from corl.trainer import CohortTrainer


def _data(opts: QuickstartOptions) -> str:
    return "vtiny" if opts.vision else "tiny"


# The quickstart's prompt: the problem alone, as the families were pretrained on it (a text
# family after a newline; a vision family in its processor's chat template, the image first).
TEMPLATE, VISION_TEMPLATE = TINY_PROMPT["template"], TINY_VL_PROMPT["template"]


def prompts_for(problems: list[Problem], processor=None) -> list:
    if processor is None:
        return [TEMPLATE.format(problem=p.texts["problem"]) for p in problems]
    from corl.vision.inputs import image_prompt

    return [
        image_prompt(processor, VISION_TEMPLATE.format(problem=p.texts["problem"]), p.inputs.get(IMAGES_INPUT)) for p in problems
    ]


# -- pieces ---------------------------------------------------------------------------------


def task_split(
    opts: QuickstartOptions, split: str = "test", size: int | None = None
) -> tuple[list[Problem], list[str], list[str]]:
    """(problems, answers, types) of a split of the tiny task (default: the held-out test split)."""
    source = f"{_data(opts)}:{split}:{size or opts.test_size}"
    rows = load_rows(source)
    problems, gold = build_problems(rows, source, ["problem"], answer_field="answer", image_field=IMAGES_INPUT)
    return problems, [gold[p.id] for p in problems], [r["type"] for r in rows]


def regime(base_val: dict[str, dict]) -> dict:
    """Theorem 1's condition on the validation split, before RL: per problem type, each agent's
    sampled (T=1) accuracy and, for every pair, their sum (> 1: peer labels beat self labels)."""
    names = list(base_val)
    types = sorted(base_val[names[0]]["sampled_by_type"])
    per_agent = {n: base_val[n]["sampled_by_type"] for n in names}
    pair_sums = {
        f"{a}+{b}": {t: per_agent[a][t] + per_agent[b][t] for t in types} for i, a in enumerate(names) for b in names[i + 1 :]
    }
    sampled = {n: base_val[n]["avg@4"] for n in names}
    greedy = {n: base_val[n]["greedy"] for n in names}  # GT-Reward's room to gain (corl.studies.claims.room_to_gain)
    return {"sampled_by_type": per_agent, "pair_sums": pair_sums, "sampled": sampled, "greedy": greedy}


def evaluate_model(model, tokenizer, test, opts: QuickstartOptions, k: int = 4, seed: int = 0, processor=None) -> dict:
    """Greedy accuracy per problem type and average; avg@k at T=1; one sampled answer per problem."""
    problems, gold, types = test
    engine = build_engine(RolloutConfig(engine=opts.engine), model, tokenizer, processor=processor)
    prompts = prompts_for(problems, processor)  # the template of every quickstart run
    greedy, _ = sample_answers(engine, prompts, 1, SamplingParams(0.0, 1.0, opts.max_new_tokens))
    torch.manual_seed(seed)
    sampled, lengths = sample_answers(engine, prompts, k, SamplingParams(1.0, 1.0, opts.max_new_tokens))
    greedy_ok = [c[0] for c in grade(greedy, gold)]
    sampled_ok = grade(sampled, gold)
    return {
        "greedy": sum(greedy_ok) / len(greedy_ok),
        "greedy_correct": [int(c) for c in greedy_ok],  # per problem: the claims' paired noise
        "samples": sampled,  # every T=1 answer: the pooled ensembles (dropped from results.json)
        "greedy_by_type": accuracy_by_group(greedy_ok, types),
        "sampled_by_type": accuracy_by_group([sum(c) / k for c in sampled_ok], types),
        f"avg@{k}": sum(map(sum, sampled_ok)) / (len(gold) * k),
        "mean_length": sum(lengths) / len(lengths),
        # the first sample of each problem, for the error-decoupling analysis
        "sample_correct": [c[0] for c in sampled_ok],
        "sample_answers": [s[0] for s in sampled],
    }


def decoupling(base_evals: dict[str, dict], resampled: dict[str, dict]) -> list[dict]:
    """Error-decoupling metrics of every cross-family pair and each model vs its own resample."""
    from corl.studies.diversity import pair_stats

    names = list(base_evals)
    rows = []
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            ea, eb = base_evals[a], base_evals[b]
            rows.append(
                pair_stats(a, b, ea["sample_correct"], eb["sample_correct"], ea["sample_answers"], eb["sample_answers"]).as_dict()
                | {"correct_a": ea["sample_correct"], "correct_b": eb["sample_correct"]}
            )
    for a in names:
        ea, eb = base_evals[a], resampled[a]
        rows.append(
            pair_stats(
                a,
                f"{a} (2nd sample)",
                ea["sample_correct"],
                eb["sample_correct"],
                ea["sample_answers"],
                eb["sample_answers"],
                kind="seed",
            ).as_dict()
            | {"correct_a": ea["sample_correct"], "correct_b": eb["sample_correct"]}
        )
    return rows


def run_config(
    method: str,
    spec: Method,
    agents: list[tuple[str, Path, int]],
    opts: QuickstartOptions,
    seed: int,
    run_dir: Path,
    cohort_size: int | None = None,
) -> dict:
    """The raw `corl train` config of one method's run (written to the run directory);
    `cohort_size`: the study's number of families (default: this run's agents)."""
    raw = {
        "output_dir": str(run_dir),
        "device": "cpu",
        "rollout": {"engine": opts.engine},
        "agents": [{"name": name, "model": str(path), "lr": opts.lr, "seed": s} for name, path, s in agents],
        "data": {
            "train": f"{_data(opts)}:train:{opts.train_size}",
            "val": f"{_data(opts)}:validation:{opts.val_size}",
            "val_split": "validation",
            "val_size": opts.val_size,
            "template": VISION_TEMPLATE if opts.vision else TEMPLATE,
            "instruction": "",
        },
        "cohort": {
            "label_source": spec.label_source,
            "reward": spec.reward,
            "steps": opts.steps,
            "seed": seed,
            "prompts_per_step": opts.prompts_per_step,
            "samples_per_prompt": opts.samples_per_prompt,
            "max_new_tokens": opts.max_new_tokens,
            "min_agreement": opts.min_agreement,
        },
        "logging": {
            "eval_every": opts.eval_every,
            "eval_on_start": True,
            "tensorboard": False,
            "progress": opts.progress,
            "print_every": 0,  # the bar alone: a line per step of every run would bury the study's own lines
        }
        | selection_logging(spec.label_source),
        "grpo": dict(spec.grpo),
    }
    votes = spec.votes_per_prompt(opts.samples_per_prompt, cohort_size or len(agents))
    if votes is not None:
        raw["cohort"]["votes_per_prompt"] = votes
    if spec.frozen is not None:
        raw["agents"][spec.frozen]["train"] = False
    return raw


def method_groups(method: str, cohort: dict[str, Path]) -> list[list[tuple[str, Path, int]]]:
    """The runs of `method`: (agent name, base model, seed offset) per agent of each run."""
    spec = METHODS[method]
    names = list(cohort)
    if spec.same_family:
        return [[(f"{names[0]}#0", cohort[names[0]], 0), (f"{names[0]}#1", cohort[names[0]], 1)]]
    if spec.together:
        return [[(n, cohort[n], i) for i, n in enumerate(names)]]
    return [[(n, cohort[n], 0)] for n in names]


def train_group(
    method: str, group: list[tuple[str, Path, int]], cohort_size: int, opts: QuickstartOptions, seed: int
) -> tuple[dict, str, float]:
    """A job: train one run of `method` (one agent alone, or the cohort together) and evaluate
    each of its agents on the test split; returns (agent -> results, a line for the log, seconds)."""
    spec = METHODS[method]
    test = task_split(opts)
    run_dir = opts.out / f"seed{seed}" / (method if spec.together else f"{method}-{group[0][0]}")
    cfg = validate_config(run_config(method, spec, group, opts, seed, run_dir, cohort_size), f"quickstart {method}")
    shutil.rmtree(run_dir, ignore_errors=True)  # a rerun of the study replaces its runs: a run folder holds one run
    trainer = CohortTrainer(cfg, run_dir)
    t0 = time.perf_counter()
    with _step_bar(trainer, opts) as on_step:
        trainer.train(on_step=on_step)
    seconds = time.perf_counter() - t0
    line = f"  {method:<18} {'+'.join(n for n, _, _ in group):<24} {opts.steps} steps in {seconds:5.1f}s"
    results = {}
    for agent in trainer.agents.values():
        results[agent.name] = evaluate_model(agent.model, agent.tokenizer, test, opts, seed=seed, processor=agent.processor)
        results[agent.name]["run_dir"] = str(run_dir)
        results[agent.name]["train_seconds"] = round(seconds / len(trainer.agents), 1)
        results[agent.name]["selection"] = evaluate_selected(
            run_dir, agent.name, results[agent.name]["greedy"], lambda folder: _folder_accuracy(folder, test, opts)
        )
    return results, line, time.perf_counter() - t0


def train_methods(
    methods: list[str], cohort: dict[str, Path], opts: QuickstartOptions, seed: int, jobs: Jobs, say: Callable[[str], None]
) -> tuple[dict[str, dict], dict[str, float]]:
    """Every run of `methods` side by side, the cohort runs (the longest) first.

    Returns (method -> agent -> results, method -> seconds its runs took, evaluation included)."""
    calls = [(m, group, len(cohort), opts, seed) for m in methods for group in method_groups(m, cohort)]
    calls.sort(key=lambda call: -len(call[1]))
    finished = jobs.map(train_group, calls, on_done=lambda i, result: say(result[1]))
    results: dict[str, dict] = {}
    seconds: dict[str, float] = {}
    for (method, *_), (agents, _, took) in zip(calls, finished):
        results.setdefault(method, {}).update(agents)
        seconds[method] = seconds.get(method, 0.0) + took
    return {m: results[m] for m in methods if m in results}, seconds


def _folder_accuracy(folder: Path, test, opts: QuickstartOptions) -> float:
    """Greedy test accuracy of a checkpoint's agent folder (a selected checkpoint)."""
    from corl.models import load_agent_policy

    model, tok, processor = load_agent_policy(str(folder))
    return greedy_test_accuracy(model, tok, test, opts, processor, prompts_for)


# -- the study ------------------------------------------------------------------------------------------


def evaluate_base(opts: QuickstartOptions, path: Path) -> tuple[dict, dict, dict]:
    """A job: a base model on the test split, a second sample of it (the seed-only pair), and on validation."""
    from corl.models import load_agent_policy

    model, tok, processor = load_agent_policy(str(path))
    test, val = task_split(opts), task_split(opts, "validation", opts.regime_size)
    return (
        evaluate_model(model, tok, test, opts, seed=0, processor=processor),
        evaluate_model(model, tok, test, opts, k=1, seed=2, processor=processor),
        evaluate_model(model, tok, val, opts, seed=0, processor=processor),
    )


def cpu_seconds() -> float | None:
    """User + system CPU time of this process and of its children that have ended (the study's
    workers, once joined); None where `resource` is missing (Windows)."""
    try:
        import resource
    except ImportError:
        return None
    usage = [resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    return sum(u.ru_utime + u.ru_stime for u in usage)


def run_quickstart(opts: QuickstartOptions, say: Callable[[str], None] = print) -> dict:
    """Every stage of the embedded default; returns the JSON-ready results."""
    start, cpu_start = time.perf_counter(), cpu_seconds()
    unknown = [m for m in opts.methods if m not in METHODS]
    if unknown:
        raise ValueError(f"unknown method(s) {unknown}; choose from {', '.join(METHODS)}")
    opts.out.mkdir(parents=True, exist_ok=True)
    torch.set_flush_denormal(True)
    _quiet_hub_progress_bars()

    with Jobs() as jobs:
        say("1/4 cohort: pretraining tiny families (cached after the first run)")
        cohort = build_cohort(opts, jobs)
        t_cohort = time.perf_counter() - start

        say("2/4 base models: accuracy and error decoupling before RL")
        evals = jobs.map(evaluate_base, [(opts, path) for path in cohort.values()])
        base, resampled, base_val = ({name: e[i] for name, e in zip(cohort, evals)} for i in range(3))
        pairs = decoupling(base, resampled)
        base_regime = regime(base_val)
        test = task_split(opts)
        t_base = time.perf_counter() - start - t_cohort

        say("3/4 training every method under the same budget")
        per_seed: list[dict] = []
        skipped: list[str] = []
        for seed in range(opts.seed, opts.seed + opts.seeds):
            essential = [m for m in opts.methods if m in ESSENTIAL and m != "base"]
            methods, spent = train_methods(essential, cohort, opts, seed, jobs, say)
            deadline = opts.budget_s * (seed - opts.seed + 1) / opts.seeds
            wanted = [m for m in opts.methods if m not in ESSENTIAL and m != "base"]
            optional, late = within_budget(wanted, spent, time.perf_counter() - start, deadline, jobs.workers)
            for method, finish in late.items():
                skipped.append(f"{method} (seed {seed}): would end at ~{finish:.0f} s, past the {deadline:.0f} s budget")
                say(
                    f"  {method}: skipped, would end at ~{finish:.0f} s, past the {deadline:.0f} s budget (raise --budget-minutes to run it)"
                )
            methods |= train_methods(optional, cohort, opts, seed, jobs, say)[0]
            order = [m for m in opts.methods if m in methods]
            per_seed.append(({"base": base} if "base" in opts.methods else {}) | {m: methods[m] for m in order})

    say("4/4 report")
    results = summarize(
        opts,
        cohort,
        pairs,
        per_seed,
        skipped,
        t_cohort,
        time.perf_counter() - start,
        gold=test[1],
        regime=base_regime,
        types=test[2],
    )
    results["base_eval_seconds"] = round(t_base, 1)
    from corl.studies.report import write_report

    # The report states the wall time; what comes after (two plots, two files) takes about a second.
    results["wall_time_s"] = round(time.perf_counter() - start, 1)
    # The work itself, whatever the machine's speed and cores: wall time alone cannot tell a slower
    # machine from a costlier study (the same study took 246 s and 338 s on two 2-core machines).
    cpu_end = cpu_seconds()
    results["cpu_seconds"] = round(cpu_end - cpu_start, 1) if cpu_end is not None else None
    results["report"] = str(write_report(results, opts.out))
    (opts.out / "results.json").write_text(json.dumps(results, indent=1))
    return results


@contextlib.contextmanager
def _step_bar(trainer: CohortTrainer, opts: QuickstartOptions):
    """A live bar of the run's steps and rewards on a terminal (`corl train`'s); nothing in logs or CI."""
    if not (opts.progress and sys.stderr.isatty()):
        yield None
        return
    from rich.console import Console

    from corl.launch.progress import StepProgress

    with StepProgress(trainer, Console(stderr=True)) as bar:
        yield bar


def predicted_cost(method: str, spent: dict[str, float]) -> float:
    """Seconds `method`'s runs would take: every method has the same budget, so it costs what
    the essential method of its shape (each agent alone: TTRL; the cohort together: Co-RL) cost
    this seed; with nothing measured yet, its cost is unknown and taken as 0."""
    return spent.get("co-rl" if METHODS[method].together else "ttrl", 0.0)


def within_budget(
    methods: list[str], spent: dict[str, float], elapsed: float, deadline: float, workers: int
) -> tuple[list[str], dict[str, float]]:
    """(the optional methods to run, method -> predicted end of each one left out): in order, a
    method is taken if the runs taken so far and its own, spread over the workers, end by `deadline`."""
    taken, late, cost = [], {}, 0.0
    for method in methods:
        finish = elapsed + (cost + predicted_cost(method, spent)) / workers
        if finish > deadline:
            late[method] = finish
            continue
        taken.append(method)
        cost += predicted_cost(method, spent)
    return taken, late


def _quiet_hub_progress_bars() -> None:
    """Loading/saving tiny checkpoints dozens of times would print as many tqdm bars."""
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
