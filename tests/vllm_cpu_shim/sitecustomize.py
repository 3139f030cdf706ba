"""Test environment only (CI's vLLM venv, `PYTHONPATH=tests/vllm_cpu_shim`): lets PyPI's
torchvision import beside the CPU build of torch.

vLLM's multimodal models import transformers' image processors, which import torchvision.
PyPI has only CUDA builds of torchvision for Linux x86_64, whose compiled ops need
libtorch_cuda: importing one beside CPU torch fails with "operator torchvision::nms does
not exist", raised while torchvision registers fake kernels for its ops. Those two
registrations only need the ops' schemas; defining them (no kernel) before torchvision
loads is enough for its pure-Python image transforms, which is all image preprocessing
uses. Calling torchvision.ops.nms would still fail: nothing in corl or vLLM's image paths
does. A meta-path hook, so that torch is imported only by processes that import torchvision.
"""

import importlib.abc
import sys

_LIBRARIES = []


class _DefineTorchvisionOps(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "torchvision" and not _LIBRARIES:
            import torch

            library = torch.library.Library("torchvision", "FRAGMENT")
            library.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
            library.define("qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
            _LIBRARIES.append(library)
        return None  # the normal import machinery finds torchvision itself


sys.meta_path.insert(0, _DefineTorchvisionOps())
