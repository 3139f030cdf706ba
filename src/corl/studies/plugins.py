"""What the studies add to the library's registries: the embedded tiny models and tasks, and the real pair.

    tiny:<family>                  a tiny text family, pretrained on first use (corl.studies.tiny)
    tiny-vl:<family>               a tiny vision-language family (corl.studies.tiny_vl)
    tiny:<split>[:<rows>]          data: the embedded synthetic text task
    vtiny:<split>[:<rows>]         data: the embedded synthetic image task
    real:<model>                   SmolLM2-135M-Instruct or Gemma-3-270M from public GGUF files (corl.studies.real)
    real:<split>[:<rows>]          data: the real-model study's task (one-digit arithmetic as bare equations)

The library never imports this module: the `corl` command does, and so does the `corl.plugins`
entry point (pyproject.toml) that `corl.registry` loads on a name it does not know; library
code outside an installed corl can name it in a config's `plugins:`.
"""

from __future__ import annotations

from corl.data.rows import DataError, register_data_source
from corl.models.sources import ModelSource, register_model_source
from corl.studies.real import source as real_source
from corl.studies.tiny.task import PROMPT_TEMPLATE


def tiny_path(name: str):
    from corl.studies.tiny.pretrain import ensure_pretrained

    return ensure_pretrained(name)


def tiny_config(name: str):
    """A tiny family's config: the pretrained cache's when it is built, else the spec's
    (a random model of the family: kilobytes, and the same architecture)."""
    from transformers import AutoConfig

    from corl.plan.models import as_saved
    from corl.studies.tiny.families import build_random_model, get_family
    from corl.studies.tiny.pretrain import SPEC_FILE, build_tokenizer, cache_path

    spec = get_family(name)
    cached = cache_path(spec)
    if (cached / SPEC_FILE).is_file():
        return AutoConfig.from_pretrained(cached)
    model = build_random_model(
        spec.arch, build_tokenizer(spec), hidden=spec.hidden, layers=spec.layers, heads=spec.heads, ffn=spec.ffn
    )
    return as_saved(model.config)


def tiny_tokenizer(name: str):
    from corl.studies.tiny.families import get_family
    from corl.studies.tiny.pretrain import SPEC_FILE, build_tokenizer, cache_path

    spec = get_family(name)
    cached = cache_path(spec)
    if (cached / SPEC_FILE).is_file():
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(cached)
    return build_tokenizer(spec)


def tiny_vl_path(name: str):
    from corl.studies.tiny_vl.pretrain import ensure_pretrained_vl

    return ensure_pretrained_vl(name)


def tiny_vl_config(name: str):
    from corl.plan.models import as_saved
    from corl.studies.tiny_vl.families import build_vl_family

    return as_saved(build_vl_family(name)[0].config)


def tiny_vl_processor(name: str):
    from corl.studies.tiny_vl.families import build_processor, get_vl_family

    return build_processor(get_vl_family(name))


def _names_check(kind: str, get, known):
    """A ModelSource.check: `get(name)` raises KeyError for a name it has no family of."""

    def check(name: str) -> None:
        import difflib

        try:
            get(name)
        except KeyError:
            names = list(known())
            close = difflib.get_close_matches(name, names, n=2, cutoff=0.6)
            hint = f"did you mean {' or '.join(close)}? " if close else ""
            raise ValueError(f"unknown {kind} {name!r}; {hint}the families: {', '.join(names)}") from None

    return check


def _tiny_families():
    from corl.studies.tiny.families import FAMILIES

    return FAMILIES


def _tiny_vl_families():
    from corl.studies.tiny_vl.families import VL_FAMILIES

    return VL_FAMILIES


def _tiny_family(name: str):
    from corl.studies.tiny.families import get_family

    return get_family(name)


def _tiny_vl_family(name: str):
    from corl.studies.tiny_vl.families import get_vl_family

    return get_vl_family(name)


def _split_rows(spec: str, source: str, prefix: str, splits, make_split) -> list[dict]:
    parts = spec.split(":")
    if len(parts) not in (1, 2) or parts[0] not in splits or (len(parts) == 2 and not parts[1].isdigit()):
        raise DataError(f"dataset {source!r}: write {prefix}:<split>[:<rows>] with split one of {', '.join(splits)}")
    return make_split(parts[0], int(parts[1]) if len(parts) == 2 else 500, seed=0)


def tiny_rows(spec: str, source: str) -> list[dict]:
    """`tiny:<split>[:<rows>]` -> rows of the generated task (500 rows by default)."""
    from corl.studies.tiny.task import SPLITS, make_split

    return _split_rows(spec, source, "tiny", SPLITS, make_split)


def vtiny_rows(spec: str, source: str) -> list[dict]:
    """`vtiny:<split>[:<rows>]` -> rows of the generated image task (500 rows by default), images as PIL."""
    from corl.studies.tiny_vl.task import SPLITS, make_split

    return _split_rows(spec, source, "vtiny", SPLITS, make_split)


# What the families were pretrained on, and what the quickstart prompts them with: the bare
# problem and a newline (a vision family: the problem in its processor's template, the image first).
TINY_PROMPT = {"template": PROMPT_TEMPLATE, "instruction": "", "chat": False}
TINY_VL_PROMPT = {"template": "{problem}", "instruction": ""}
register_model_source(
    "tiny",
    ModelSource(
        tiny_path,
        tiny_config,
        tiny_tokenizer,
        describe="tiny family",
        prompt=TINY_PROMPT,
        check=_names_check("tiny family", _tiny_family, _tiny_families),
    ),
)
register_model_source(
    "tiny-vl",
    ModelSource(
        tiny_vl_path,
        tiny_vl_config,
        tiny_vl_processor,
        vision=True,
        describe="tiny vision family",
        prompt=TINY_VL_PROMPT,
        check=_names_check("tiny vision family", _tiny_vl_family, _tiny_vl_families),
    ),
)
register_data_source("tiny", tiny_rows)
register_data_source("vtiny", vtiny_rows)


register_model_source(
    "real",
    ModelSource(
        real_source.path,
        real_source.config,
        real_source.tokenizer,
        describe="real model",
        prompt=real_source.PROMPT,
        check=real_source.check,
    ),
)
register_data_source("real", real_source.rows)
