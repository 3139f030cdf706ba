"""Task kinds (`data.task`): math answers, and more registered the same way."""

from corl.tasks import math  # noqa: F401  (registers "math")
from corl.tasks.code import task as _code  # noqa: F401  (registers "code" with its code: data source)
from corl.tasks.registry import TASKS, TaskSpec, register_task, task_spec

__all__ = ["TASKS", "TaskSpec", "register_task", "task_spec"]
