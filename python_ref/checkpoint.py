"""Read and write the engine's checkpoint files (".tinygpt").

The container is safetensors:

    [8 bytes]  N, the header length, unsigned 64-bit little-endian
    [N bytes]  JSON header:
                 {"__metadata__": {str: str, ...},
                  "<tensor name>": {"dtype": "F32" | "F16" | "BF16" | "I32",
                                    "shape": [...],
                                    "data_offsets": [begin, end]},   # relative to the data area
                  ...}
               padded with spaces so that the data area starts 8-byte aligned
    [...]      the raw little-endian tensor bytes, contiguous, in header order

A model checkpoint holds the parameters under their spec names (tok_emb.weight, ...), and
optionally the AdamW moments as optim.m.<name> and optim.v.<name>. A half-precision export
(`ptl export --dtype f16|bf16`) stores the weights as F16 or BF16; they load widened to float32,
exactly, so that every model here computes in float32 whatever the file held. The metadata strings
describe the model (model_config, tokenizer) and the run (train_config, train_state,
loss_history), most of them as JSON text.

Only struct, json, numpy and torch are used: no safetensors package is needed.
"""

import json
import os
import struct

import numpy as np
import torch

FORMAT_NAME = "tinygpt"
FORMAT_VERSION = "1"

OPTIM_M_PREFIX = "optim.m."
OPTIM_V_PREFIX = "optim.v."

_DTYPES = {  # file dtype -> (numpy little-endian dtype, torch dtype)
    "F32": (np.dtype("<f4"), torch.float32),
    "I32": (np.dtype("<i4"), torch.int32),
}
# Storage-only dtypes, read widened to float32 (numpy has no bfloat16: its 16 bits are the high
# half of a float32, so they are shifted into place).
_HALF_DTYPES = {"F16": np.dtype("<f2"), "BF16": np.dtype("<u2")}


def _widen(array, dtype):
    if dtype == "F16":
        return array.astype(np.float32)
    return (array.astype(np.uint32) << 16).view(np.float32)


_TORCH_TO_FILE = {torch.float32: "F32", torch.int32: "I32", torch.float16: "F16", torch.bfloat16: "BF16"}


def load_checkpoint(path, skip=None):
    """Read a checkpoint. Returns (state_dict, metadata): name -> tensor, and str -> str.
    Tensors whose name `skip(name)` is true for are left out, whatever their dtype (the
    attention-mask buffers of Hugging Face GPT-2 files, python_ref/hf.py)."""
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        raise ValueError(f"{path}: too short to be a checkpoint ({len(raw)} bytes)")
    (n,) = struct.unpack("<Q", raw[:8])
    if 8 + n > len(raw):
        raise ValueError(f"{path}: header length {n} runs past the end of the file")
    header = json.loads(raw[8 : 8 + n].decode("utf-8"))
    data = memoryview(raw)[8 + n :]

    metadata = header.pop("__metadata__", {}) or {}
    # Tensors in the order of their bytes in the file (JSON key order is not significant).
    entries = sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0])
    state_dict = {}
    for name, info in entries:
        if skip is not None and skip(name):
            continue
        dtype = info["dtype"]
        if dtype not in _DTYPES and dtype not in _HALF_DTYPES:
            raise ValueError(f"{path}: tensor {name} has dtype {dtype}; only F32, F16, BF16 and I32 are supported")
        np_dtype = _HALF_DTYPES[dtype] if dtype in _HALF_DTYPES else _DTYPES[dtype][0]
        begin, end = info["data_offsets"]
        shape = list(info["shape"])
        numel = int(np.prod(shape)) if shape else 1
        if not (0 <= begin <= end <= len(data)) or end - begin != numel * np_dtype.itemsize:
            raise ValueError(f"{path}: tensor {name}: bad data_offsets {begin}..{end} for shape {shape}")
        array = np.frombuffer(data[begin:end], dtype=np_dtype).reshape(shape)
        if dtype in _HALF_DTYPES:
            state_dict[name] = torch.from_numpy(_widen(array, dtype))
        else:
            state_dict[name] = torch.from_numpy(array.astype(np_dtype.newbyteorder("="), copy=True))
    return state_dict, dict(metadata)


def save_checkpoint(path, state_dict, metadata):
    """Write a checkpoint atomically (temp file in the same folder, then os.replace). Tensors are
    written in their own dtype: float32, int32, float16 or bfloat16 (anything else as float32)."""
    header = {"__metadata__": {str(k): str(v) for k, v in metadata.items()}}
    blobs = []
    offset = 0
    for name, tensor in state_dict.items():
        tensor = tensor.detach().cpu().contiguous()
        if tensor.dtype not in _TORCH_TO_FILE:
            tensor = tensor.float()  # e.g. float64 from a user; the format stores fp32
        dtype = _TORCH_TO_FILE[tensor.dtype]
        if dtype == "BF16":  # numpy has no bfloat16: its bits, as 16-bit integers
            blob = tensor.view(torch.int16).numpy().astype("<i2", copy=False).tobytes()
        elif dtype == "F16":
            blob = tensor.numpy().astype("<f2", copy=False).tobytes()
        else:
            blob = tensor.numpy().astype(_DTYPES[dtype][0], copy=False).tobytes()
        header[name] = {"dtype": dtype, "shape": list(tensor.shape), "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)

    header_bytes = json.dumps(header, separators=(",", ":")).encode("utf-8")
    header_bytes += b" " * ((-(8 + len(header_bytes))) % 8)  # data area starts 8-byte aligned

    tmp = f"{path}.tmp-{os.getpid()}"
    try:
        with open(tmp, "wb") as f:
            f.write(struct.pack("<Q", len(header_bytes)))
            f.write(header_bytes)
            for blob in blobs:
                f.write(blob)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)  # a failed write leaves neither a stray file nor a damaged checkpoint
        raise


# ---------------------------------------------------------------------------------------------
# Splitting a checkpoint into its parts


def split_state(state_dict):
    """Split a loaded state into (model weights, adam m, adam v); m and v keyed by param name."""
    weights, m, v = {}, {}, {}
    for name, t in state_dict.items():
        if name.startswith(OPTIM_M_PREFIX):
            m[name[len(OPTIM_M_PREFIX) :]] = t
        elif name.startswith(OPTIM_V_PREFIX):
            v[name[len(OPTIM_V_PREFIX) :]] = t
        else:
            weights[name] = t
    return weights, m, v


def join_state(weights, m=None, v=None):
    """The inverse of split_state: one dict ready for save_checkpoint."""
    out = dict(weights)
    for name, t in (m or {}).items():
        out[OPTIM_M_PREFIX + name] = t
    for name, t in (v or {}).items():
        out[OPTIM_V_PREFIX + name] = t
    return out


def model_weights(state_dict):
    """Only the model parameters (optimizer moments dropped)."""
    return split_state(state_dict)[0]


def make_metadata(model_config, train_config=None, train_state=None, loss_history=None, created_by="python_ref"):
    """The metadata strings of a model checkpoint. model_config: dict with vocab_size, n_layers,
    d_model, n_heads, ctx, and optionally gelu (written only when not the default "erf")."""
    keys = ("vocab_size", "n_layers", "d_model", "n_heads", "ctx")
    mc = {k: int(model_config[k]) for k in keys}
    if model_config.get("gelu", "erf") != "erf":
        mc["gelu"] = model_config["gelu"]
    meta = {
        "format": FORMAT_NAME,
        "format_version": FORMAT_VERSION,
        "model_config": json.dumps(mc),
        "tokenizer": json.dumps({"type": "byte", "vocab_size": 256}),
        "created_by": created_by,
    }
    if train_config is not None:
        meta["train_config"] = json.dumps(train_config)
    if train_state is not None:
        meta["train_state"] = json.dumps(train_state)
    if loss_history is not None:
        meta["loss_history"] = json.dumps(loss_history)
    return meta


def parse_json_field(metadata, key, default=None):
    """A metadata value decoded from JSON (default when absent)."""
    if key not in metadata:
        return default
    return json.loads(metadata[key])
