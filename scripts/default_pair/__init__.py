"""Training of brigade's default model pair: a small Qwen3-MoE target and a Qwen3 draft, with
their own byte-level BPE tokenizer, on the Python 3.11 documentation. scripts/train_default_pair.py
runs it; docs/default_model.md describes the result."""
