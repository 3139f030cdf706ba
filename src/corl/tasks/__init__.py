"""Task kinds (`data.task`): math answers, and more registered the same way."""

from corl.tasks import code_task, math  # noqa: F401  (register "code" with its code: data source, and "math")
from corl.tasks.registry import TASKS, TaskSpec, register_task, task_spec

__all__ = ["TASKS", "TaskSpec", "register_task", "task_spec"]
