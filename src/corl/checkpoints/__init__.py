"""Everything a run writes that outlives it, and how a process finds its way back in.

- `checkpoint`: step checkpoints (one folder per agent, the loop state, a manifest of sha256
  sums), written to a temporary name and renamed; the latest verified one; RNG states.
- `sharded`: FSDP2 and multi-node checkpoints (each rank its shards; which rank commits where).
- `export`: a checkpoint's agents as plain Hugging Face folders that load anywhere.
- `run_folder`: a run folder belongs to one run (its record, its lock, how a process enters it).
- `model_card`: the README.md of every agent folder (method, teacher, data, scores).

Imported by the trainer, the launcher, evaluation (`corl eval RUN`) and the CLI; imports the
config, models, labels and rewards (for the cards), tracking and the exchange of `parallel`.
"""
