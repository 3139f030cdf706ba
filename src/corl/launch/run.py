"""The entry point of a run: one process, or this rank of a torchrun world.

    corl train CONFIG                                                # one process, every agent
    torchrun --standalone --nproc-per-node 2 -m corl train CONFIG    # one machine, 2 processes
    torchrun --nnodes 2 --nproc-per-node 8 --rdzv-backend c10d \\
             --rdzv-endpoint HEAD:29500 -m corl train CONFIG         # on every node
    srun --nodes 2 --ntasks-per-node 1 torchrun --nnodes 2 --nproc-per-node 8 --rdzv-backend c10d \\
         --rdzv-endpoint $(scontrol show hostnames | head -1):29500 -m corl train CONFIG

This is the one module that imports both the trainer and the parallel pieces. Across
agents only the answers table and per-step statistics travel, by all_gather_object over
the whole world (gloo: objects are small). Agents of any architecture and size mix. The
same code runs on GPUs (NCCL) and CPUs (gloo), with distributed.fsdp or without.

Failure: the first rank to fail writes RUN_DIR/failure.json (on its node), and every rank
exits non-zero (torchrun then stops the rest). A failed checkpoint (a full disk, a rank that
died inside it) is agreed on by every rank and said once (corl.checkpoints.checkpoint.CheckpointFailed).

Multi-node: RUN_DIR may be on a disk every node sees or on each node's own. At start the
ranks find out which of them see the same RUN_DIR; on each disk one rank commits the
checkpoints (corl.checkpoints.sharded). Without a shared disk each node holds its own
agents' checkpoint parts and a loop state, the main rank's node alone holds metrics.jsonl,
tensorboard/ and config.yaml, and a resume takes the newest checkpoint every node holds.
An agent's ranks must then share one node (refused otherwise: its checkpoint would be
split); a node must keep its RUN_DIR across restarts. Tested with two launchers on one
machine, each in its own folder (tests/parallel/test_distributed_fsdp.py).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shutil
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path

import torch
import torch.distributed as dist

from corl.checkpoints.checkpoint import CheckpointFailed, checkpoint_step, latest_checkpoint
from corl.checkpoints.run_folder import RunEntry, enter_run_folder
from corl.checkpoints.sharded import disks
from corl.config import ConfigError, RunConfig
from corl.data.rows import DataError
from corl.launch.preemption import Preemption, StopNow
from corl.models import resolve_device
from corl.parallel import (
    DataParallel,
    Heartbeat,
    LauncherStopped,
    Layout,
    PeerFailure,
    WorldExchange,
    plan_layout,
    under_torchrun,
)
from corl.trainer import CohortTrainer, Preempted

FAILURE_FILE = "failure.json"
# What the user gave is wrong (config, a model folder, a data row): `corl train` says it, exit 2
INPUT_ERRORS = (ConfigError, DataError, FileNotFoundError)
FAULT_ENV = "CORL_TEST_FAULT"  # test-only fault injection, see `_injected_fault`


def launch(cfg: RunConfig, run_dir: str | Path, resume: bool = False, progress_factory=None) -> dict | None:
    """Run a cohort in this process, or as this rank of a torchrun world.

    Returns the last metrics on the main process (None on the other ranks).
    """
    if under_torchrun():
        return _launch_distributed(cfg, Path(run_dir), resume, progress_factory)
    if cfg.distributed.fsdp:
        raise ConfigError("distributed.fsdp needs torchrun, also on one GPU: torchrun --nproc-per-node 1 -m corl train CONFIG")
    with Preemption(cfg.distributed.preempt_grace_s, run_dir) as preemption, _stops(preemption, Path(run_dir)):
        trainer = CohortTrainer(cfg, run_dir, resume=resume)
        fault = _injected_fault(cfg, trainer.placement, Path(run_dir))
        on_step = (lambda step, metrics: fault(step + 1)) if fault is not None else None
        return _train(trainer, progress_factory, on_step, should_stop=preemption.at_step_boundary)


@contextmanager
def _stops(preemption: Preemption, run_dir: Path) -> Iterator[None]:
    """A stop on a signal, as `Preempted` with the signal's name and exit status (143 after
    SIGTERM, 130 after Ctrl-C, as a shell reports them); one while the run was starting, when
    no checkpoint of it was written, names the last one there is."""
    try:
        yield
    except (StopNow, Preempted) as err:
        raise _as_preempted(err, preemption, run_dir) from None


def _as_preempted(err: StopNow | Preempted, preemption: Preemption, run_dir: Path) -> Preempted:
    if isinstance(err, StopNow):
        last = latest_checkpoint(run_dir)
        err = Preempted(checkpoint_step(last) if last is not None else 0, last, run_dir, saved=False)
    err.signal_name, err.exit_code = preemption.name, preemption.exit_code
    return err


def _train(trainer, progress_factory=None, on_step: Callable[[int, dict], None] | None = None, should_stop=None) -> dict:
    if progress_factory is None:
        return trainer.train(on_step=on_step, should_stop=should_stop)
    with progress_factory(trainer) as progress:

        def both(step: int, metrics: dict) -> None:
            progress(step, metrics)
            if on_step is not None:
                on_step(step, metrics)

        return trainer.train(on_step=both, should_stop=should_stop)


def _device(cfg: RunConfig) -> torch.device:
    device = resolve_device(cfg.device)
    if device.type == "cuda":  # one GPU per local rank, whatever index the config names
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        torch.cuda.set_device(device)
    return device


def _launch_distributed(cfg: RunConfig, run_dir: Path, resume: bool, progress_factory) -> dict | None:
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    layout = plan_layout([a.name for a in cfg.agents], world, cfg.distributed.placement)
    device = _device(cfg)
    if layout.dp_size > cfg.cohort.prompts_per_step:
        raise ConfigError(
            f"each agent has {layout.dp_size} data-parallel ranks but cohort.prompts_per_step is {cfg.cohort.prompts_per_step}: "
            "every rank needs at least one prompt per step"
        )
    timeout = timedelta(seconds=cfg.distributed.timeout_s)
    backend = "nccl" if device.type == "cuda" else "gloo"
    store, _, _ = next(dist.rendezvous("env://", timeout=timeout))
    # torchrun --max-restarts keeps the store its workers connect to, with every key the last
    # attempt wrote: unprefixed, gloo would read a dead peer's listening address from it (when
    # that peer starts later than this rank) and fail with "connection refused". Each attempt
    # sets up its process groups under its own keys.
    attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    if rank == 0 and attempt != "0":
        _file_away_failure(run_dir, int(attempt) - 1)
    # from before the folder is entered: a signal while starting stops at once and leaves it as it was
    preemption = Preemption(cfg.distributed.preempt_grace_s, run_dir).__enter__()
    try:
        with _stops(preemption, run_dir):
            # a refused run folder gets no failure.json (it may hold another run)
            entry = _enter_as_attempt(cfg, run_dir, resume, store, int(attempt), lock=rank == 0)
    except BaseException:
        preemption.__exit__()
        raise
    try:
        with _stops(preemption, run_dir):
            dist.init_process_group(
                backend, store=dist.PrefixStore(f"corl-pg/{attempt}", store), rank=rank, world_size=world, timeout=timeout
            )
    except BaseException:
        entry.leave()
        preemption.__exit__()
        raise
    atexit.register(_destroy_before_finalization)
    heartbeat = Heartbeat(store, rank, cfg.distributed.timeout_s, layout)
    heartbeat.start_beating()
    preemption.heartbeat = heartbeat
    try:
        # Objects travel over gloo: NCCL would move every pickled table through the GPU.
        objects = dist.new_group(backend="gloo", timeout=timeout) if backend != "gloo" else None
        exchange = WorldExchange(heartbeat, objects)
        dp = _data_parallel(layout, rank, device, backend, timeout, heartbeat, cfg.distributed.fsdp)
        placement = replace(layout.placement(rank), commits_checkpoints=_commits_checkpoints(run_dir, rank, layout, exchange))
        resume = any(exchange.all_gather(resume))  # a node without a shared disk may hold no checkpoint: it is told
        trainer = CohortTrainer(
            cfg,
            run_dir,
            resume=resume,
            placement=placement,
            exchange=exchange,
            device=device,
            data_parallel=dp,
            entry=entry,
        )
        # the step in progress, as checkpoints and rows count them: failure.json's "where" and the messages
        heartbeat.context = f"step {trainer.start_step + 1}"
        fault = _injected_fault(cfg, placement, run_dir)

        def on_step(step: int, metrics: dict) -> None:  # after the loop's step `step` (step `step + 1` done)
            heartbeat.context = f"step {min(step + 2, cfg.cohort.steps)}"  # the next, or the last's final checkpoint
            if fault is not None:
                fault(step + 1)

        def should_stop() -> bool:  # every rank asks at every boundary: they stop after the same step
            return any(trainer.exchange.all_gather(preemption.at_step_boundary()))

        last = _train(trainer, progress_factory if placement.is_main else None, on_step, should_stop)
    except (StopNow, Preempted) as err:
        entry.leave()
        dist.destroy_process_group()
        raise _as_preempted(err, preemption, run_dir) from None
    except BaseException as err:
        preemption.failing = True
        entry.leave()
        _report_failure(run_dir, rank, layout, heartbeat, err)
        raise
    finally:
        preemption.__exit__()
    dist.barrier()  # no rank closes its gloo pairs while a peer may still read from them
    heartbeat.stop_beating()
    dist.destroy_process_group()
    return last if rank == 0 else None


def _destroy_before_finalization(wait_s: float = 10.0) -> None:
    """At exit, a process group a failure left standing is destroyed while the interpreter is alive.

    why: gloo's worker threads hold tensors with Python references; left to the interpreter's
    finalization, their destruction takes the GIL of an interpreter being torn down and the rank
    dies of SIGABRT ("terminate called without an active exception": a second line beside the
    failure's one, exit -6 instead of 1; pytorch/pytorch#179291 proposed this handler in
    init_process_group). In a thread, so that a peer that never answers cannot hold the exit."""
    if not dist.is_initialized():
        return  # the run ended normally: destroyed already

    def destroy() -> None:
        with contextlib.suppress(Exception):  # exiting already, and its failure said
            dist.destroy_process_group()

    done = threading.Thread(target=destroy, daemon=True)
    done.start()
    done.join(wait_s)


def _commits_checkpoints(run_dir: Path, rank: int, layout: Layout, exchange: WorldExchange) -> bool:
    """Whether this rank commits the checkpoints on its disk: rank 0 when every node sees the
    run directory, else the first rank of each node (corl.checkpoints.sharded)."""
    try:
        disk = disks(run_dir, rank, exchange)
    except OSError as err:
        raise ConfigError(f"output directory {str(run_dir)!r} cannot be written on {os.uname().nodename}: {err}") from err
    for first in range(0, layout.world, layout.dp_size):
        ranks = layout.dp_ranks(first)
        if len({disk[r] for r in ranks}) > 1:
            raise ConfigError(
                f"{layout.describe(list(ranks))} do not all see the same run directory {str(run_dir)!r}: the agent's "
                "checkpoint would be split between nodes. Put each agent's ranks on one node (--nproc-per-node a multiple "
                "of the ranks per agent) or the run directory on a disk every node sees"
            )
    return disk[rank] == rank


RUN_STARTED_KEY = "corl/run-started"  # in torchrun's store, which outlives the attempts of a job


def _enter_as_attempt(cfg: RunConfig, run_dir: Path, resume: bool, store, attempt: int, lock: bool = True) -> RunEntry:
    """How this attempt of a torchrun job enters the run folder. A restart (--max-restarts)
    continues the run that an earlier attempt of the same job got into, whatever `resume`
    says: from its last checkpoint, or from step 0 with its rows dropped when it has none.
    An attempt that was refused the folder (it holds another run) leaves no key, so its
    restarts are refused too instead of resuming that other run.

    Every rank decides alone, from the same files: no rank writes into the folder before all
    of them have met (the disk check's all_gather in CohortTrainer). `lock`: rank 0, which
    writes the folder's record and rows, holds the folder's lock for the run's life."""
    restarted = attempt > 0 and store.check([RUN_STARTED_KEY])
    entry = enter_run_folder(cfg, run_dir, resume=resume, restarted=restarted, lock=lock)
    store.set(RUN_STARTED_KEY, str(run_dir))
    return entry


def _data_parallel(
    layout: Layout, rank: int, device: torch.device, backend: str, timeout: timedelta, heartbeat: Heartbeat, fsdp: bool
) -> DataParallel:
    """The ("agent", "dp") device mesh; this rank's agent group is its 1-D "dp" sub-mesh."""
    from torch.distributed.device_mesh import init_device_mesh

    shape = (layout.world // layout.dp_size, layout.dp_size)  # with P < N the first axis counts processes
    try:
        options = dist.ProcessGroupNCCL.Options() if backend == "nccl" else dist.ProcessGroupGloo._Options()
        options._timeout = timeout  # sub-groups would otherwise get torch's default (30 min)
        mesh = init_device_mesh(device.type, shape, mesh_dim_names=("agent", "dp"), backend_override={"dp": (backend, options)})
    except (AttributeError, TypeError):  # torch < 2.6: no backend_override
        mesh = init_device_mesh(device.type, shape, mesh_dim_names=("agent", "dp"))
    dp_mesh = mesh["dp"]
    return DataParallel(
        group=dp_mesh.get_group(),
        ranks=layout.dp_ranks(rank),
        rank=rank % layout.dp_size,
        heartbeat=heartbeat,
        mesh=dp_mesh if fsdp else None,
        device=device,
    )


def _file_away_failure(run_dir: Path, attempt: int) -> None:
    """A restarted attempt keeps the last one's failure.json as failure-attempt<N>.json: the
    file a user reads names this attempt's failure (first writer wins), if there is one."""
    failure = run_dir / FAILURE_FILE
    if failure.is_file():
        failure.replace(run_dir / f"failure-attempt{attempt}.json")


def _report_failure(run_dir: Path, rank: int, layout: Layout, heartbeat: Heartbeat, err: BaseException) -> None:
    """Publish this rank's failure to the others and write RUN_DIR/failure.json (first writer wins).
    A failed checkpoint every rank agreed on is recorded by the rank that says it, alone."""
    if isinstance(err, CheckpointFailed) and not err.speaks:
        return
    if isinstance(err, LauncherStopped):
        message = f"{err} in {heartbeat.context}: another rank has probably exited; see the launcher's summary"
    elif isinstance(err, PeerFailure):
        message = str(err)
    else:
        message = f"{type(err).__name__}: {err}"
    me = layout.describe([rank])
    missing = list(getattr(err, "missing", []))
    agreed = isinstance(err, CheckpointFailed)  # known to every rank already; one of them says it (corl.cli.train)
    if not missing and not agreed:
        # A peer that was SIGKILLed (or OOM-killed) wrote nothing and broke the collective (or
        # made torchrun stop this rank): name it by its heartbeat, which has stopped.
        dead = heartbeat.stopped_ranks()
        if dead:
            missing = dead
            message = f"{message}; {layout.describe(dead)} stopped answering (no heartbeat): it has probably died (killed, out of memory?)"
    record = {
        "rank": rank,
        "agents": [layout.names[n] for n in layout.hosts[rank]],
        "error": message,
        "missing": [{"rank": r, "agents": [layout.names[n] for n in layout.hosts[r]]} for r in missing],
        "where": heartbeat.context,
        "time": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    if not isinstance(err, PeerFailure) and not agreed:  # a PeerFailure's cause is already known to the others
        heartbeat.publish(record)
    _write_failure(run_dir, {"reported_by": me, **record})
    # an input error (a missing folder, a malformed row) is the command's to say, once for the
    # world (corl.parallel.once): every rank met the same one
    if not agreed and not isinstance(err, INPUT_ERRORS):
        print(f"corl: {me}: {message}", file=sys.stderr, flush=True)


def _write_failure(run_dir: Path, record: dict) -> None:
    """RUN_DIR/failure.json, first writer wins, whole or not at all (a temporary file linked into
    place). Not into a folder that is not there: a run that never started has left none behind."""
    if not run_dir.is_dir():
        return
    tmp = run_dir / f".{FAILURE_FILE}.{os.getpid()}.tmp"
    try:
        tmp.write_text(json.dumps(record, indent=1))
        os.link(tmp, run_dir / FAILURE_FILE)  # fails where an earlier failure is recorded
    except OSError:
        pass  # recorded already, or the disk is full: no record rather than a truncated one
    finally:
        tmp.unlink(missing_ok=True)


def _injected_fault(cfg: RunConfig, placement, run_dir: Path) -> Callable[[int], None] | None:
    """TEST-ONLY fault injection: CORL_TEST_FAULT="AGENT:hang|exit:STEP" makes the first
    (dp rank 0) process of agent AGENT hang forever, or exit at once with status 17, just
    after step STEP (>= 1, its checkpoint written), in one process or under torchrun; "fill" fills
    the run folder's disk there (64 KiB stay free), "full" to the last byte. Used by
    tests/parallel/test_distributed.py, tests/launch/; never set it in real runs."""
    spec = os.environ.get(FAULT_ENV)
    if not spec or os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") != "0":  # a restarted attempt runs clean
        return None
    name, mode, at = spec.split(":")  # mode: hang, exit (status 17), kill (SIGKILL: no cleanup at all), fill or full
    if mode not in ("hang", "exit", "kill", "fill", "full"):
        return None  # a fault injected elsewhere (corl.checkpoints.sharded: kill-writing)
    names = [a.name for a in cfg.agents]
    if names.index(name) not in placement.agents or placement.dp_rank != 0:
        return None

    def fault(step: int) -> None:
        if step != int(at):
            return
        if mode == "hang":
            while True:
                time.sleep(3600)
        if mode == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        if mode in ("fill", "full"):  # something else fills the disk between two checkpoints
            left = 64 * 1024 if mode == "fill" else 0
            free = shutil.disk_usage(run_dir).free
            with open(run_dir / ".test-filler", "wb") as f, contextlib.suppress(OSError):
                f.write(b"\0" * max(0, free - left))
                f.flush()
            return
        os._exit(17)

    return fault
