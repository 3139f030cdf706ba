"""The memory arithmetic of one agent on one rank: small pure functions of shapes and sizes.

Every figure is in bytes and counts live tensors (what `torch.cuda.max_memory_allocated`
reports on a GPU): no allocator slack, CUDA context or NCCL buffers (`plan.headroom`
keeps room for those). The per-tensor lists below come from reading what corl's code path
keeps alive (corl.trainer, corl.models.prepare, corl.rollout.compact) and what autograd saves
for a Hugging Face Llama/Qwen2-style decoder layer; benchmarks/memory_plan.py checks the
totals against the measured peak of the real step.

Precision modes (`Precision`): corl always loads float32 weights. `fp32` computes in them;
`autocast` (compute.bf16 without FSDP) wraps forward in bf16 autocast: matmuls and their
saved inputs are bf16, the residual stream and RMSNorm stay float32, and autocast keeps a
bf16 copy of every weight for the backward; `fsdp_bf16` (compute.bf16 with FSDP2) gathers
bf16 parameters, so every activation is bf16 except RMSNorm's float32 internals.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Precision = Literal["fp32", "autocast", "fsdp_bf16"]
FP32 = 4
BF16 = 2


@dataclass(frozen=True)
class DecoderShape:
    """What the activation and KV-cache arithmetic needs of a decoder (the text model of a VLM)."""

    layers: int
    hidden: int  # h
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int  # f
    vocab: int  # V
    attention: str = "sdpa"  # the config's attention implementation (eager keeps [S, S] scores)
    qk_norm_width: int = 0  # RMSNorms on queries and keys (Qwen3: per head, head_dim wide); 0: none

    @property
    def attention_width(self) -> int:  # a = heads * head_dim (usually h)
        return self.heads * self.head_dim

    @property
    def kv_width(self) -> int:  # g = kv_heads * head_dim
        return self.kv_heads * self.head_dim


@dataclass(frozen=True)
class VisionShape:
    """A vision tower's size, for the estimate of what its images and activations take."""

    layers: int
    hidden: int
    intermediate: int
    patch_values: int  # pixel values per patch (channels x frames x patch x patch)


def compute_bytes(precision: Precision) -> int:
    """Bytes of one element of a matmul output (the bulk of the saved activations)."""
    return FP32 if precision == "fp32" else BF16


# -- states: parameters, gradients, optimizer ------------------------------------------------


def parameter_bytes(params: int) -> int:
    """corl loads every policy in float32 (models.loading) and keeps float32 master weights under bf16."""
    return FP32 * params


def gradient_bytes(trainable: int) -> int:
    """Gradients have their parameters' dtype (float32; FSDP2 reduces bf16 compute into float32 shards)."""
    return FP32 * trainable


def adamw_bytes(trainable: int) -> int:
    """torch.optim.AdamW: exp_avg and exp_avg_sq, float32, one pair per trainable parameter."""
    return 2 * FP32 * trainable


def shard(numel: int, first_dim: int, ranks: int) -> int:
    """Elements of one rank's FSDP2 shard of a parameter: dim 0 split into `ranks` padded chunks."""
    if ranks <= 1:
        return numel
    return -(-first_dim // ranks) * (numel // max(first_dim, 1))


def optimizer_step_bytes(trainable_shard: int, largest_param: int, on_gpu: bool) -> int:
    """Temporaries of one AdamW step. On GPUs torch's foreach path takes sqrt(exp_avg_sq) of
    every parameter at once (one float32 copy of the states); on CPU the single-tensor path
    does it parameter by parameter (the largest parameter's sqrt and its denominator)."""
    return FP32 * trainable_shard if on_gpu else 2 * FP32 * largest_param


# -- activations of the update ------------------------------------------------------------------


def layer_saved_bytes_per_token(shape: DecoderShape, precision: Precision, seq: int) -> int:
    """Bytes autograd keeps per token of one decoder layer between its forward and backward.

    Counted with saved-tensor hooks on Llama and Qwen2 layers: each RMSNorm keeps its input
    (float32) and the normalised tensor, and its output goes into the next matmuls (under
    autocast each matmul keeps its own bf16 cast of it: three for q/k/v, two for gate/up;
    fsdp_bf16 keeps the float32 copy of its input, the bf16 normalised tensor and the output).
    Attention keeps q, k and v (k and v repeated to every query head: with a padding mask
    transformers turns SDPA's native GQA off) and its output; the SwiGLU MLP keeps gate,
    silu(gate), up and their product. SDPA keeps a float32 logsumexp per head; eager
    attention keeps each token's [heads, seq] softmax row instead (float32, plus its bf16
    cast under autocast).
    """
    h, a, f = shape.hidden, shape.attention_width, shape.intermediate
    b = compute_bytes(precision)
    norms = {"fp32": 6 * FP32, "autocast": 4 * FP32 + 5 * BF16, "fsdp_bf16": 2 * FP32 + 4 * BF16}[precision] * h
    attention = 4 * b * a
    mlp = 4 * b * f
    if shape.attention == "eager":
        scores = shape.heads * seq * (FP32 if precision == "fp32" else FP32 + BF16)
    else:
        scores = shape.heads * FP32  # logsumexp
    return norms + attention + mlp + scores + qk_norm_bytes_per_token(shape, precision)


def qk_norm_bytes_per_token(shape: DecoderShape, precision: Precision) -> int:
    """What RMSNorms on the queries and keys (Qwen3, OLMo-2) keep per token of a layer: for each
    of the a + g projected values their float32 input and the normalised tensor (float32, or
    its bf16 cast), and a float32 reciprocal RMS per normalised group (per head for Qwen3).
    Counted with saved-tensor hooks on a Qwen3 layer against a Llama layer of the same shape
    (a = 64, g = 32, head_dim 16: 792 bytes more in float32, 600 in bf16 autocast and bf16)."""
    if not shape.qk_norm_width:
        return 0
    width = shape.attention_width + shape.kv_width
    return width * (FP32 + compute_bytes(precision)) + FP32 * (width // shape.qk_norm_width)


def residual_bytes(precision: Precision) -> int:
    """Bytes per element of the residual stream (what a checkpointed layer keeps: its input)."""
    return BF16 if precision == "fsdp_bf16" else FP32


def backward_working_bytes_per_token(shape: DecoderShape, precision: Precision) -> int:
    """Gradients alive at once inside a recomputed layer's backward: the residual gradient
    and about one and a half [T, f] MLP gradients (measured: 1,928 B/token fp32 and 790 bf16
    autocast at h = 64, f = 256, where this gives 1,792 and 1,024)."""
    return residual_bytes(precision) * shape.hidden + 3 * compute_bytes(precision) * shape.intermediate // 2


def update_peak_bytes(
    shape: DecoderShape, precision: Precision, sequences: int, seq: int, checkpointing: bool, logit_elements: int
) -> int:
    """Peak above the model's states of one minibatch's forward + backward (corl.trainer.update).

    Without checkpointing the peak is at the start of the backward: every layer's saved
    tensors plus the logits' (`logit_bytes`). With corl's non-reentrant per-layer
    checkpointing each layer keeps only its input, and the peak is the larger of the
    logits' backward and one recomputed layer with its gradients. Both add the final norm,
    the int64 inputs (ids, mask, positions) and SDPA's [n, 1, S, S] mask.
    """
    tokens = sequences * seq
    per_layer = layer_saved_bytes_per_token(shape, precision, seq)
    final_norm = 3 * FP32 * shape.hidden
    mask = 0 if shape.attention == "eager" else sequences * seq * seq * compute_bytes(precision)
    common = tokens * (final_norm + 3 * 8) + mask
    logits = logit_bytes(logit_elements)
    if not checkpointing:
        return common + tokens * shape.layers * per_layer + logits
    kept = tokens * shape.layers * residual_bytes(precision) * shape.hidden
    layer = tokens * (per_layer + backward_working_bytes_per_token(shape, precision))
    return common + kept + max(logits, layer)


def logit_bytes(elements: int) -> int:
    """Peak of the output head's share on `elements` logits (positions x V), at the start of
    its backward: the float32 logits divided by the temperature (kept by logsumexp) and the
    gradients of the gather, the logsumexp and their sum (measured: 16.0 B per logit in
    float32, bf16 autocast and FSDP2 bf16 alike)."""
    return 16 * elements


def head_elements(sequences: int, completion: int, vocab: int, chunk_elements: int | None) -> int:
    """Logits held at once: all [n, C, V], or corl's chunked head (agent.LOGIT_CHUNK_ELEMENTS):
    max(1, chunk_elements // (n * V)) positions of every sequence at a time."""
    if chunk_elements is None:
        return sequences * completion * vocab
    positions = max(1, chunk_elements // max(sequences * vocab, 1))
    return sequences * min(positions, completion) * vocab


def loss_bytes(sequences: int, completion: int) -> int:
    """The [n, C] float32 tensors of the GRPO loss (ratios, clips, masks, advantages, ...): about 24."""
    return 24 * FP32 * sequences * completion


def autocast_weight_copies(linear_params: int, checkpointing: bool, layers: int) -> int:
    """bf16 autocast keeps a bf16 copy of every weight it casts for the backward; with
    checkpointing only the recomputed layer's (the copies of a checkpointed forward are dropped)."""
    return BF16 * (linear_params // max(layers, 1) if checkpointing else linear_params)


def fsdp_gather_bytes(block_params: int, root_params: int, width: int = BF16) -> int:
    """FSDP2 gathers parameters in `width` bytes (bf16 under compute.bf16): the root's
    (embeddings, head, final norm) stay gathered through forward and backward; a block and
    the next one (prefetch) while they compute, and a block's gradient is unsharded in that
    width and reduce-scattered in float32."""
    return width * root_params + (3 * width + FP32) * block_params


def root_gradient_bytes(head_params: int, width: int = BF16) -> int:
    """FSDP2: the root unit's gradient, unsharded in the gathered `width`, from the output head's
    backward (the first of the update's backward) until the root's reduce-scatter after the
    last layer's: the head's (with tied embeddings the embedding's, the same tensor) and, a
    rounding error beside it, the final norm's. An untied embedding's comes only after the
    last layer, once the activations are gone."""
    return width * head_params


def vision_bytes(vision: VisionShape, precision: Precision, patches: int, grad: bool) -> int:
    """A vision-language forward's images: float32 pixel values of every row (corl gathers each
    sequence's prompt images: K copies of a prompt's), and the tower's activations, estimated
    as a ViT layer's (two LayerNorms, attention, a two-matrix MLP): with autograd every layer
    keeps about 10 [patches, hidden] and 3 [patches, intermediate] tensors; without, one
    layer's 3 and 2 at a time. An estimate: not measured layer by layer as the decoder's."""
    b = compute_bytes(precision)
    pixels = FP32 * patches * vision.patch_values
    if grad:
        return pixels + patches * vision.layers * (10 * vision.hidden + 3 * vision.intermediate) * b
    return pixels + patches * (3 * vision.hidden + 2 * vision.intermediate) * b


# -- sampling -------------------------------------------------------------------------------


def kv_bytes_per_token(shape: DecoderShape, precision: Precision) -> int:
    """Keys and values of every layer for one token. Under autocast the keys leave RoPE in
    float32 (its cos/sin follow the float32 residual stream) and the values stay bf16."""
    per = {"fp32": FP32 + FP32, "autocast": FP32 + BF16, "fsdp_bf16": BF16 + BF16}[precision]
    return shape.layers * shape.kv_width * per


def hf_sampling_bytes(shape: DecoderShape, precision: Precision, sequences: int, prompt: int, completion: int) -> int:
    """corl's HF engine (rollout.compact) on `sequences` at once: their KV cache at full length,
    one layer's more while DynamicCache concatenates, and each decode step's [n, V] logits,
    warped scores, log-softmax and softmax (float32)."""
    kv = kv_bytes_per_token(shape, precision) * sequences * (prompt + completion)
    growing = kv // max(shape.layers, 1)
    decode = 4 * FP32 * sequences * shape.vocab
    return kv + growing + decode


def no_grad_forward_bytes(shape: DecoderShape, precision: Precision, sequences: int, seq: int) -> int:
    """A forward pass without autograd (old or reference log-probs): one layer's tensors at a
    time, at most the residual, the MLP's gate, up, silu and product, and the final hidden states."""
    b = compute_bytes(precision)
    return sequences * seq * (3 * residual_bytes(precision) * shape.hidden + 4 * b * shape.intermediate)


def gib(n: float) -> float:
    return n / 2**30


def size(n: float) -> str:
    """Bytes for people: MiB below a GiB, GiB above."""
    return f"{n / 2**20:.1f} MiB" if abs(n) < 2**30 else f"{n / 2**30:.2f} GiB"
