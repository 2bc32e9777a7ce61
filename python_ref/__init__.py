"""PyTorch reference for posttrainllm's TinyGPT: the numerical oracle for the C++ engine.

from python_ref import TinyGPT, load_checkpoint, save_checkpoint, generate
"""

from .checkpoint import load_checkpoint, save_checkpoint, split_state, join_state, make_metadata
from .model import GPTConfig, TinyGPT, PRESETS, preset_config, param_count
from .tokenizer import CheckpointTokenizer


def __getattr__(name):  # lazy, so `python -m python_ref.sample` does not import itself twice
    if name == "generate":
        from .sample import generate

        return generate
    raise AttributeError(name)


__all__ = [
    "load_checkpoint",
    "save_checkpoint",
    "split_state",
    "join_state",
    "make_metadata",
    "GPTConfig",
    "TinyGPT",
    "PRESETS",
    "preset_config",
    "param_count",
    "CheckpointTokenizer",
    "generate",  # noqa: F822 (from the module __getattr__ above)
]
