"""Old import paths of modules that moved (0.1 -> 0.2), kept for one release with a warning.

`import corl.checkpoint` still works and gives the module itself (`corl.checkpoints.checkpoint`,
the same object, so patching through the old name patches the real one), after a FutureWarning
that names the new path; `python -m corl.torchrun` still runs. FutureWarning rather than
DeprecationWarning: Python shows the second only for imports written in __main__, so an old
import in a user's own module would pass unnoticed until the path is gone. Remove in 0.3.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import warnings

MOVED = {
    "corl.checkpoint": "corl.checkpoints.checkpoint",
    "corl.checkpoint_sharded": "corl.checkpoints.sharded",
    "corl.code_eval": "corl.evaluation.code_eval",
    "corl.data_catalog": "corl.data.catalog",
    "corl.diagnostics": "corl.tracking.diagnostics",
    "corl.engine_options": "corl.rollout.options",
    "corl.evaluate": "corl.evaluation.evaluate",
    "corl.grade": "corl.evaluation.grade",
    "corl.grade_formats": "corl.evaluation.grade_formats",
    "corl.health": "corl.tracking.health",
    "corl.model_card": "corl.checkpoints.model_card",
    "corl.model_sources": "corl.models.sources",
    "corl.progress": "corl.launch.progress",
    "corl.run_folder": "corl.checkpoints.run_folder",
    "corl.run_targets": "corl.evaluation.run_targets",
    "corl.sources": "corl.data.sources",
    "corl.step_numbering": "corl.tracking.step_numbering",
    "corl.suite": "corl.evaluation.suite",
    "corl.suite.external": "corl.evaluation.suite.external",
    "corl.suite.graders": "corl.evaluation.suite.graders",
    "corl.suite.protocol": "corl.evaluation.suite.protocol",
    "corl.suite.report": "corl.evaluation.suite.report",
    "corl.suite.run": "corl.evaluation.suite.run",
    "corl.suite.runner": "corl.evaluation.suite.runner",
    "corl.suite.stats": "corl.evaluation.suite.stats",
    "corl.tasks.code_exec": "corl.tasks.code.execute",
    "corl.tasks.code_inputs": "corl.tasks.code.inputs",
    "corl.tasks.code_judge": "corl.tasks.code.judge",
    "corl.tasks.code_plus": "corl.tasks.code.plus",
    "corl.tasks.code_stub": "corl.tasks.code.stub",
    "corl.tasks.code_task": "corl.tasks.code.task",
    "corl.tasks.code_values": "corl.tasks.code.values",
    "corl.tasks.code_wire": "corl.tasks.code.wire",
    "corl.torchrun": "corl.launch.torchrun",
    "corl.tracking_wandb": "corl.tracking.wandb_run",
    "corl.tracking_wandb_log": "corl.tracking.wandb_log",
}


def _message(old: str) -> str:
    return f"{old} moved to {MOVED[old]}; the old path goes in corl 0.3"


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """A finder and loader for the old names: the loaded module is the new one."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in MOVED:
            return None
        new = importlib.util.find_spec(MOVED[fullname])
        # origin: `python -m <old name>` puts it in sys.argv[0], as for the module itself
        return importlib.machinery.ModuleSpec(
            fullname, self, origin=new.origin, is_package=new.submodule_search_locations is not None
        )

    def create_module(self, spec):
        return None  # a placeholder module; exec_module puts the real one in its place

    def exec_module(self, module):
        old = module.__name__
        warnings.warn(_message(old), FutureWarning, stacklevel=3)
        # importlib hands back whatever sys.modules holds under the name once this returns
        sys.modules[old] = importlib.import_module(MOVED[old])

    def get_code(self, fullname):
        """`python -m <old name>` (runpy asks for the code): the new module's code, run as __main__."""
        new = MOVED[fullname]
        print(_message(fullname), file=sys.stderr)
        return importlib.util.find_spec(new).loader.get_code(new)


def install() -> None:
    if not any(isinstance(f, _Alias) for f in sys.meta_path):
        sys.meta_path.insert(0, _Alias())
