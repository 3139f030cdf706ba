"""The trainer: Algorithm 1 (`loop`), the run around it (`run`, `setup`, `validation`), one
agent (`agent`) and its GRPO update (`update`, `logprobs`), and the step's answers table (`table`)."""

from corl.trainer.agent import Agent
from corl.trainer.loop import CohortTrainer
from corl.trainer.run import Preempted, Run
from corl.trainer.setup import Dataset, build_agent, load_eval_data, load_train_data, sampling_seed
from corl.trainer.update import UpdateStats

__all__ = [
    "Agent",
    "CohortTrainer",
    "Dataset",
    "Preempted",
    "Run",
    "UpdateStats",
    "build_agent",
    "load_eval_data",
    "load_train_data",
    "sampling_seed",
]
