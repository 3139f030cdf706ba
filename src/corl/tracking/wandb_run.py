"""Weights & Biases: one W&B run per training run, continued on resume.

    logging:
      report_to: [tensorboard, wandb]       # metrics.jsonl is always written
      wandb: {project: corl, group: co-rl-vs-ttrl, tags: [tiny]}

One W&B run holds the whole cohort: each agent's metrics under its name (`agent0/reward_mean`,
`agent0/val_accuracy`; W&B groups panels by the part before the slash), the cohort's under
`cohort/`, the run's configuration, and at the end a table of every agent's last training and
validation figures (summary key `final/agents`). The x-axis is corl's step, as in
metrics.jsonl (steps count from 1; a validation before the first step sits at 0).

Resume: the W&B run's id is kept in RUN/wandb.json and a resumed training run continues that
W&B run. Every row of metrics.jsonl reaches W&B exactly once: each carries its row number
(hidden key `corl/row`), and a resume asks W&B which rows it holds (online: the run's summary;
offline: its transaction logs, `corl.tracking.wandb_log`), sends the rows of metrics.jsonl it
lacks (a SIGKILL can come before W&B's service has stored what corl handed it) and skips the
redone steps it has (corl's resume is exact: the same numbers but for timings). Offline (`WANDB_MODE=offline` or logging.wandb.mode) writes
RUN/wandb/offline-run-*/ and needs no network; `wandb sync` uploads it later.
"""

from __future__ import annotations

import json
import math
import os
import secrets
import string
import sys
from pathlib import Path

from corl.config import ConfigError, RunConfig
from corl.tracking.metrics import write_error

STATE_FILE = "wandb.json"  # {"id": W&B run id, "last_step": {kind: last step sent}, "rows": true}
ROW_KEY = "corl/row"  # hidden: a row's number in metrics.jsonl (0-based), what a resume compares with W&B's
MISSING = (
    "logging.report_to names wandb, but the wandb package is not installed: pip install 'corl[wandb]' "
    "(or pip install wandb), or remove wandb from logging.report_to"
)


def check_wandb_installed(cfg: RunConfig) -> None:
    """Refuse, before any model loads, a run that reports to W&B without the package."""
    if not cfg.logging.reports_to("wandb"):
        return
    try:
        import wandb  # noqa: F401
    except ImportError:
        raise ConfigError(MISSING) from None


NO_CREDENTIALS = (
    "logging.report_to names wandb, but no W&B API key is set (WANDB_API_KEY, or `wandb login`, which writes {netrc}); "
    "log in, or set logging.wandb.mode: offline (or WANDB_MODE=offline) and `wandb sync` later"
)


def check_wandb_ready(cfg: RunConfig) -> None:
    """Refuse, before anything is written or loads, a run that reports to W&B online without the
    package or without credentials: found later, the run folder would already hold the run."""
    check_wandb_installed(cfg)
    if not cfg.logging.reports_to("wandb"):
        return
    mode = os.environ.get("WANDB_MODE") or cfg.logging.wandb.mode or "online"
    if (
        mode in ("offline", "disabled", "dryrun")
        or os.environ.get("WANDB_API_KEY")
        or os.environ.get("WANDB_IDENTITY_TOKEN_FILE")
    ):
        return
    from urllib.parse import urlparse

    host = urlparse(os.environ.get("WANDB_BASE_URL") or "https://api.wandb.ai").hostname or "api.wandb.ai"
    netrc = _netrc_path()
    try:
        words = netrc.read_text().split()
    except (OSError, UnicodeDecodeError):
        words = []
    if any(a == "machine" and b == host for a, b in zip(words, words[1:])):
        return
    raise ConfigError(NO_CREDENTIALS.format(netrc=netrc))


def _netrc_path() -> Path:
    """Where W&B keeps its key: $NETRC, else ~/.netrc (~/_netrc on Windows), as `wandb login` writes it."""
    if os.environ.get("NETRC"):
        return Path(os.environ["NETRC"]).expanduser()
    unix, windows = Path("~/.netrc").expanduser(), Path("~/_netrc").expanduser()
    return windows if not unix.exists() and windows.exists() else unix


def wandb_mirrors(cfg: RunConfig, run_dir: str | Path, resumed: bool) -> list:
    """[a started `WandbRun`] when the config reports to W&B, else []: mirrors for `MetricsLog`."""
    if not cfg.logging.reports_to("wandb"):
        return []
    return [WandbRun(cfg, Path(run_dir), resumed)]


class WandbRun:
    """Receives every metrics row of a run (as `MetricsLog` writes it) and sends it to W&B once."""

    def __init__(self, cfg: RunConfig, run_dir: Path, resumed: bool):
        check_wandb_installed(cfg)
        import wandb

        self.state_path = run_dir / STATE_FILE
        state = _read_state(self.state_path) if resumed else None
        # the id is written before W&B starts: a crash at any later moment still resumes this W&B run
        # "rows": this W&B run's rows carry their row number (a run from before them has no such key)
        self.state = state or {"id": new_run_id(), "last_step": {}, "rows": True}
        run_dir.mkdir(parents=True, exist_ok=True)
        self._save_state()
        opts = cfg.logging.wandb
        try:
            self.run = wandb.init(
                project=opts.project,
                entity=opts.entity,
                name=opts.name or run_dir.resolve().name,
                group=opts.group,
                tags=opts.tags or None,
                mode=opts.mode,
                dir=str(run_dir),
                id=self.state["id"],
                resume="allow",
                job_type="train",
                config=cfg.model_dump(mode="json"),
            )
        except wandb.errors.Error as err:
            raise ConfigError(
                f"logging.report_to wandb: W&B could not start the run ({err}); log in (wandb login), or set "
                "logging.wandb.mode: offline (or WANDB_MODE=offline) and `wandb sync` later"
            ) from None
        # every series is plotted against corl's own step (W&B's internal step only counts rows)
        self.run.define_metric("step", hidden=True)
        self.run.define_metric("*", step_metric="step")
        self.run.define_metric(ROW_KEY, hidden=True)
        self.steps = cfg.cohort.steps
        self.names = [a.name for a in cfg.agents]
        self.last: dict[str, dict] = {}  # kind -> the last row sent
        # The rows W&B itself holds (not what corl handed it: a SIGKILL can come before W&B's service
        # has them): every row carries its number in metrics.jsonl, and W&B reports the highest it has.
        self.stored = self._stored_row() if state else -1
        self.row = 0  # the number of the next row of metrics.jsonl

    def _stored_row(self) -> int | None:
        """The highest row number W&B holds for this run (-1: none); None for a W&B run from before row numbers."""
        from corl.tracking.wandb_log import stored_offline

        if self.run.offline:
            found = stored_offline(self.state_path.parent, self.state["id"], ROW_KEY)
        else:
            found = self.run.summary.get(ROW_KEY)  # the server's summary: the last row it stored
        if found is None:  # W&B holds no numbered row: none yet (a kill came first), or a run from before them
            return None if self.state["last_step"] and not self.state.get("rows") else -1
        return int(found)

    def catch_up(self, records: list[dict]) -> None:
        """The rows metrics.jsonl holds when the run (re)starts: send those W&B does not have (a kill lost them)."""
        for record in records:
            metrics = {k: v for k, v in record.items() if k not in ("step", "kind")}
            self.log(record["step"], metrics, record.get("kind", "train"))

    def log(self, step: int, metrics: dict, kind: str = "train") -> None:
        number, self.row = self.row, self.row + 1
        if self.stored is None:  # a W&B run from before row numbers: the steps corl sent
            sent = self.state["last_step"].get(kind)
            if sent is not None and step <= sent:
                return
        elif number <= self.stored:
            return  # W&B holds this row (a resumed run redoing a step it already sent)
        row = {k: float(v) for k, v in metrics.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
        self.state["last_step"][kind] = step
        self._save_state()
        self.run.log({"step": step, ROW_KEY: number, **row})
        self.last[kind] = {"step": step, **row}

    def close(self) -> None:
        """Finish the W&B run; called from the trainer's `finally`, so an exception in flight is the run's fate."""
        error = sys.exc_info()[1]
        train = self.last.get("train")
        if error is None and train is not None and train["step"] == self.steps:
            self.run.summary["final/agents"] = self._final_table()
        exit_code = 0 if error is None else getattr(error, "exit_code", 1)
        if exit_code == 143:  # preempted: W&B shows it as such, and the resume continues it
            self.run.mark_preempting()
        self.run.finish(exit_code=exit_code)

    def _final_table(self):
        """One row per agent (and the cohort): its last training and validation figures."""
        import wandb

        merged = {**self.last.get("train", {}), **self.last.get("val", {})}
        metrics = sorted({k.split("/", 1)[1] for k in merged if "/" in k and k.split("/", 1)[0] in self.names})
        rows = []
        for who in [*self.names, "cohort"]:
            values = [merged.get(f"{who}/{m}") for m in metrics]
            if any(v is not None for v in values):
                rows.append([who, *(None if v is None or not math.isfinite(v) else v for v in values)])
        return wandb.Table(columns=["agent", *metrics], data=rows)

    def _save_state(self) -> None:
        tmp = self.state_path.with_name(f".{STATE_FILE}.tmp")
        try:
            tmp.write_text(json.dumps(self.state))
            os.replace(tmp, self.state_path)
        except OSError as err:
            tmp.unlink(missing_ok=True)
            raise write_error(self.state_path, err, self.state_path.parent) from None


def new_run_id() -> str:
    """Eight lowercase letters and digits, as W&B's own run ids (its generator is not public API)."""
    return "".join(secrets.choice(string.ascii_lowercase + string.digits) for _ in range(8))


def _read_state(path: Path) -> dict | None:
    try:
        state = json.loads(path.read_text())
    except (OSError, ValueError):
        return None  # no W&B run yet (report_to gained wandb on resume), or an unreadable file: a new W&B run
    return state if isinstance(state, dict) and isinstance(state.get("id"), str) else None
