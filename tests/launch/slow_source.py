"""`slow:<folder>`: a model source whose models take seconds to come (imported through a config's
`plugins:`), the window in which tests/launch/test_interrupt.py signals a run whose models load.
CORL_TEST_LOADING names a file touched when a load begins; CORL_TEST_LOAD_S is how long it takes."""

from __future__ import annotations

import os
import time
from pathlib import Path

from corl.models.sources import ModelSource, register_model_source


def _resolve(folder: str) -> str:
    if os.environ.get("CORL_TEST_LOADING"):
        Path(os.environ["CORL_TEST_LOADING"]).touch()
    time.sleep(float(os.environ.get("CORL_TEST_LOAD_S", "5")))
    return folder


def _config(folder: str):
    from transformers import AutoConfig

    return AutoConfig.from_pretrained(folder)


def _tokenizer(folder: str):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(folder)


register_model_source("slow", ModelSource(resolve=_resolve, config=_config, tokenizer=_tokenizer, describe="a folder, slowly"))
