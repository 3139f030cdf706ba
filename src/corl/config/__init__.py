"""The run configuration: one YAML file in, validated typed objects out.

    cfg = load_config("configs/tiny.yaml", overrides=["grpo.beta=0.01", "agents.1.lr=3e-4"])

Every value is checked when the file is read; a bad value raises `ConfigError` naming
the key, what was given and what is allowed, before any model is loaded. `sections` holds
one model per section, `run` the whole `RunConfig`, `files` reading and writing YAML.
"""

from corl.config.files import (
    RESUME_MAY_CHANGE,
    apply_overrides,
    check_resume_config,
    dump_config,
    flat,
    load_config,
    validate_config,
)
from corl.config.run import RunConfig
from corl.config.runtime import (
    ComputeConfig,
    DistributedConfig,
    HealthConfig,
    LoggingConfig,
    LoRAConfig,
    PlanConfig,
    SuiteConfig,
    WandbConfig,
)
from corl.config.sections import (
    DEFAULT_INSTRUCTION,
    MAX_LR,
    AgentConfig,
    CohortConfig,
    ConfigError,
    DataConfig,
    RewardTerm,
    RolloutConfig,
)
from corl.config.update import GRPOConfig

__all__ = [
    "AgentConfig",
    "CohortConfig",
    "ComputeConfig",
    "ConfigError",
    "DEFAULT_INSTRUCTION",
    "DataConfig",
    "DistributedConfig",
    "GRPOConfig",
    "HealthConfig",
    "LoRAConfig",
    "LoggingConfig",
    "MAX_LR",
    "PlanConfig",
    "RESUME_MAY_CHANGE",
    "RewardTerm",
    "RolloutConfig",
    "SuiteConfig",
    "RunConfig",
    "WandbConfig",
    "apply_overrides",
    "check_resume_config",
    "dump_config",
    "flat",
    "load_config",
    "validate_config",
]
