"""The quickstart's cohort: each family's spec as a study pretrains it, and the pretrained bases,
the missing ones built side by side (corl.studies.jobs)."""

from __future__ import annotations

import contextlib
import dataclasses
from pathlib import Path

from corl.studies.jobs import Jobs
from corl.studies.quickstart_options import QuickstartOptions


def family_specs(opts: QuickstartOptions) -> dict[str, object]:
    """Each family's spec as this study pretrains it (seed siblings for seed > 0; CI's step override)."""
    if opts.vision:
        from corl.studies.tiny_vl.families import get_vl_family, with_seed

        get, reseed = get_vl_family, with_seed
    else:
        from corl.studies.tiny.families import get_family, sibling

        get, reseed = get_family, sibling
    specs = {}
    for name in opts.families:
        spec = get(name)
        if opts.seed:
            spec = reseed(spec, spec.seed + 100 * opts.seed)
        if opts.pretrain_steps is not None and not opts.vision:
            spec = dataclasses.replace(spec, steps=opts.pretrain_steps)
        specs[name] = spec
    return specs


def pretrain_family(opts: QuickstartOptions, spec) -> Path:
    """One family's pretrained base (a job: cached; built deterministically when missing)."""
    if opts.vision:
        from corl.studies.tiny_vl.pretrain import ensure_pretrained_vl

        return ensure_pretrained_vl(spec, steps=_vl_steps(opts), progress=opts.progress)
    from corl.studies.tiny.pretrain import ensure_pretrained

    return ensure_pretrained(spec, progress=opts.progress)


def build_cohort(opts: QuickstartOptions, jobs: Jobs | None = None) -> dict[str, Path]:
    """Each family's pretrained base, the missing ones built side by side (corl.studies.jobs)."""
    specs = family_specs(opts)
    missing = [name for name, spec in specs.items() if not _cached(opts, spec)]
    with contextlib.ExitStack() as stack:
        pool = jobs if jobs is not None else stack.enter_context(Jobs())
        builders = stack.enter_context(builder_pool(pool, len(missing)))
        builders.map(pretrain_family, [(opts, specs[name]) for name in missing])
    return {name: pretrain_family(opts, spec) for name, spec in specs.items()}  # all cached now: their paths


def builder_pool(pool: Jobs, builds: int) -> contextlib.AbstractContextManager[Jobs]:
    """The pool that builds `builds` families: `pool`, or, when there are more builds than its
    workers, a pool with a worker per build (at most twice its workers).

    Why: builds take about as long as one another, so three on two workers run in two rounds
    while a core idles through the second (the three-agent ring: ~2 builds' time); started
    together, the kernel time-slices them and they end after ~1.5. Each still runs on one
    thread, so the weights are the same either way."""
    if pool.workers <= 1 or builds <= pool.workers:
        return contextlib.nullcontext(pool)
    return Jobs(min(builds, 2 * pool.workers))


def _cached(opts: QuickstartOptions, spec) -> bool:
    if opts.vision:
        from corl.studies.tiny_vl.pretrain import DONE_FILE, vl_cache_path

        return (vl_cache_path(spec, _vl_steps(opts)) / DONE_FILE).is_file()
    from corl.studies.tiny.pretrain import SPEC_FILE, cache_path

    return (cache_path(spec) / SPEC_FILE).is_file()


def _vl_steps(opts: QuickstartOptions) -> int:
    """A VL family's pretraining steps (its spec has none: ensure_pretrained_vl's default, or CI's override)."""
    from corl.studies.tiny_vl.pretrain import STEPS

    return STEPS if opts.pretrain_steps is None else opts.pretrain_steps
