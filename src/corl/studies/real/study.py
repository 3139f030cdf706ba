"""The real-model study: Base / TTRL / Co-RL / GT-Reward on a pretrained pair, run as a user runs it.

    python -m corl.studies.real                       # runs/real: a few CPU-hours on 2 cores
    python -m corl.studies.real --smoke --out /tmp/r  # every stage, minutes (the plumbing, not the result)

The pair: SmolLM2-135M-Instruct (a Llama) and Gemma-3-270M (a base Gemma 3), from their GGUF
files (corl.studies.real.weights). The task: one-digit arithmetic prompted as bare equations
(corl.studies.real.task), chosen on validation problems. Every method trains both agents under
the same budget (steps x prompts x K), on unlabeled training prompts (the train file has no
answer column), validates every few steps and publishes its label-free choice in best/
(logging.select: label_free); GT-Reward alone reads answers (it is the one method given them).
The Co-RL run is interrupted once with SIGINT (a user's Ctrl-C) after its first checkpoint and
resumed with `corl train --resume`. Each command's CPU-seconds and peak memory are measured, and
`corl plan`'s prediction is kept beside the measured peak. Then `corl eval RUN --step best` scores
every method's choice (and the bases) on held-out test problems with per-problem records, and
corl.studies.claims checks the miniatures' claims with paired standard errors.

Every stage is skipped when its output exists, so an interrupted study continues where it stopped.
Results: OUT/results.json and OUT/report.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from corl.studies.real import task
from corl.studies.real.runs import corl
from corl.studies.real.weights import AGENTS, fetch

METHODS = {"ttrl": "self", "co-rl": "peer", "gt": "truth"}  # method -> cohort.label_source


@dataclass
class RealOptions:
    out: Path = Path("runs/real")
    steps: int = 12
    prompts_per_step: int = 8
    samples_per_prompt: int = 8
    # Per agent, chosen on the validation split with GT-Reward probes (8 steps x 8 prompts x K 8, 64 val
    # problems, greedy): SmolLM2 .406 -> .594 at 1e-5 and -> .578 at 3e-6; Gemma .547 -> .094 at 1e-5
    # (collapsed onto one wrong answer) and -> .438 at 3e-6. The best validation score of each.
    lr: dict[str, float] = field(default_factory=lambda: {"smollm2": 1e-5, "gemma3": 3e-6})
    max_new_tokens: int = 6  # an answer is 1-3 tokens; the line ends it (task.STOP)
    train_size: int = 2000
    val_size: int = 64
    test_size: int = 160
    eval_every: int = 4
    k_eval: int = 8  # samples per test problem for avg@k / maj@k
    methods: tuple[str, ...] = ("base", "ttrl", "co-rl", "gt")

    @staticmethod
    def smoke(out: Path) -> RealOptions:
        return RealOptions(
            out=out, steps=2, prompts_per_step=2, samples_per_prompt=2, val_size=4, test_size=8, eval_every=1, k_eval=2
        )


def data_files(opts: RealOptions) -> dict[str, Path]:
    folder = opts.out / "data"
    files = {name: folder / f"{name}.jsonl" for name in ("train", "train_labeled", "val", "test")}
    if not all(p.is_file() for p in files.values()):
        task.write(files["train"], task.rows("train", opts.train_size, labeled=False))  # unlabeled, as in label-free training
        task.write(files["train_labeled"], task.rows("train", opts.train_size))  # the same prompts, for GT-Reward only
        task.write(files["val"], task.rows("val", opts.val_size))
        task.write(files["test"], task.rows("test", opts.test_size))
    return files


def run_config(opts: RealOptions, method: str, models: dict[str, Path], files: dict[str, Path]) -> dict:
    """The `corl train` config of one method: the pair, the task's prompt, the shared budget."""
    return {
        "output_dir": str(opts.out / "runs" / method),
        "agents": [{"name": name, "model": str(models[name]), "lr": opts.lr[name], "chat_template": False} for name in AGENTS],
        "data": {
            # GT-Reward is the one method given the answers: the same prompts, with their answer column
            "train": str(files["train_labeled"] if method == "gt" else files["train"]),
            "val": str(files["val"]),
            "val_size": opts.val_size,
            "template": task.template(),
            "instruction": "",
        },
        "cohort": {
            "label_source": METHODS[method],
            "steps": opts.steps,
            "prompts_per_step": opts.prompts_per_step,
            "samples_per_prompt": opts.samples_per_prompt,
            "max_new_tokens": opts.max_new_tokens,
            "stop_strings": [task.STOP],
            "temperature": 1.0,
            "seed": 0,
        },
        # micro-batches of at most 2,048 tokens, packed: the update's activations and Gemma's 262k-wide logits
        # stay a few GiB, the same gradients (corl plan: 9.2 GiB peak, 15 unsplit; measured RSS 12.6-13.8 GiB)
        "grpo": {"max_tokens_per_microbatch": 2048},
        "logging": {
            "eval_every": opts.eval_every,
            "eval_on_start": True,  # the bases' point: label-free selection's reference and trust checks
            "checkpoint_every": opts.eval_every,
            "select": "label_free",
            "select_also": ["truth"],  # kept beside it, for the report: what the answers would have chosen
            "tensorboard": False,
            "log_completions": True,
        },
    }


def train(opts: RealOptions, method: str, config: Path, log: Path) -> dict:
    """`corl plan`, then `corl train` (Co-RL: Ctrl-C after its first checkpoint, then --resume)."""
    run = opts.out / "runs" / method
    plan = corl("plan", str(config), log=log.with_suffix(".plan.log"), cwd=opts.out)
    measured = []
    if method == "co-rl":
        first = run / "checkpoints" / f"step_{opts.eval_every:06d}"
        measured.append(corl("train", str(config), log=log, cwd=opts.out, interrupt_when=first.is_dir))
        measured.append(corl("train", "--resume", str(run), log=log, cwd=opts.out))
    else:
        measured.append(corl("train", str(config), log=log, cwd=opts.out))
    return {
        "plan": _plan_peak(log.with_suffix(".plan.log")),
        "plan_exit": plan.exit_code,
        "commands": [m.as_dict() for m in measured],
    }


def _plan_peak(log: Path) -> float | None:
    """The plan's predicted peak per rank (GiB): its verdict line, "fits: peak 4.74 GiB per rank ..."."""
    import re

    found = re.findall(r"peak ([\d.]+) GiB", log.read_text())
    return float(found[-1]) if found else None


def evaluate(opts: RealOptions, method: str, files: dict[str, Path], models: dict[str, Path]) -> dict:
    """`corl eval` on the test split with per-problem records: a run's label-free choice, or the bases
    (base-val: the bases on the validation split)."""
    out = opts.out / "eval" / method
    out.mkdir(parents=True, exist_ok=True)
    data = files["val"] if method == "base-val" else files["test"]  # base-val: Theorem 1's regime, before RL
    common = ["--data", str(data), "--k", str(opts.k_eval), "--records", str(out / "records.jsonl"), "--json"]
    common += ["--group-by", "type"]
    if method.startswith("base"):  # the prompt the runs train with, given as options (no run folder to take it from)
        prompt = ["--template", task.template(), "--instruction", "", "--stop", task.STOP]
        prompt += ["--max-new-tokens", str(opts.max_new_tokens)]
        target = [str(models[a]) for a in AGENTS]
    else:
        prompt, target = [], [str(opts.out / "runs" / method), "--step", "best"]
    measured = corl("eval", *target, *common, *prompt, log=out / "eval.log", cwd=opts.out)
    return {"command": measured.as_dict(), "records": str(out / "records.jsonl")}


def run_study(opts: RealOptions) -> dict:
    opts.out.mkdir(parents=True, exist_ok=True)
    results_path = opts.out / "results.json"
    results = json.loads(results_path.read_text()) if results_path.is_file() else {"options": {}, "train": {}, "eval": {}}
    results["options"] = {k: str(v) if isinstance(v, Path) else v for k, v in dataclasses.asdict(opts).items()}
    models = {name: fetch(name) for name in AGENTS}
    files = data_files(opts)
    for method in [m for m in opts.methods if m != "base"]:
        if method in results["train"] and (opts.out / "runs" / method / "best").is_dir():
            continue
        config = opts.out / "configs" / f"{method}.yaml"
        config.parent.mkdir(parents=True, exist_ok=True)
        config.write_text(yaml.safe_dump(run_config(opts, method, models, files), sort_keys=False))
        results["train"][method] = train(opts, method, config, opts.out / "logs" / f"{method}.log")
        # what the study evaluates is best/ (label-free selection's copy); a finished run's checkpoints
        # are 4.6 GiB each for the pair (float32 weights and AdamW moments), two kept per run
        shutil.rmtree(opts.out / "runs" / method / "checkpoints", ignore_errors=True)
        results_path.write_text(json.dumps(results, indent=1))
    for method in [*opts.methods, *(["base-val"] if "base" in opts.methods else [])]:
        if method not in results["eval"] or results["eval"][method]["command"]["exit_code"] != 0:
            results["eval"][method] = evaluate(opts, method, files, models)
            results_path.write_text(json.dumps(results, indent=1))
    from corl.studies.real.summary import summarize

    summarize(opts.out, results, models)
    results_path.write_text(json.dumps(results, indent=1))
    return results


def _lrs(text: str) -> dict[str, float]:
    if "=" not in text:
        return dict.fromkeys(AGENTS, float(text))
    given = dict(part.split("=", 1) for part in text.split(","))
    if set(given) != set(AGENTS):
        raise argparse.ArgumentTypeError(f"name every agent once ({', '.join(AGENTS)}), got {', '.join(given)}")
    return {name: float(value) for name, value in given.items()}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=RealOptions.out)
    ap.add_argument("--smoke", action="store_true", help="every stage in minutes: the plumbing, not the result")
    for option in ("steps", "prompts_per_step", "samples_per_prompt", "val_size", "test_size", "eval_every", "k_eval"):
        ap.add_argument(f"--{option.replace('_', '-')}", type=int)
    ap.add_argument("--lr", type=_lrs, help="one learning rate for both agents, or per agent: smollm2=1e-5,gemma3=3e-6")
    ap.add_argument("--methods", help="comma-separated: base,ttrl,co-rl,gt")
    args = ap.parse_args(argv)
    opts = RealOptions.smoke(args.out) if args.smoke else RealOptions(out=args.out)
    changes = {k: v for k, v in vars(args).items() if k not in ("out", "smoke", "methods") and v is not None}
    if args.methods:
        changes["methods"] = tuple(args.methods.split(","))
    results = run_study(dataclasses.replace(opts, **changes))
    print((opts.out / "report.md").read_text() if (opts.out / "report.md").is_file() else json.dumps(results, indent=1))
