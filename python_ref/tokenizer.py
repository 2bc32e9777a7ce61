"""The tokenizer a checkpoint records (docs/checkpoint-format.md, "Tokenizer"), for decoding.

A checkpoint's metadata "tokenizer" is {"type": "byte", "vocab_size": 256} (one token per byte),
{"type": "bpe", "vocab_size": N, "sha256": H} with the tokenizer.json text under "tokenizer_json"
(H is its sha256), or {"type": "none", "vocab_size": V} (a model of ids that reads no text).

python_ref computes on token ids whatever the tokenizer; this module turns ids back into bytes
(GPT-2's byte-level scheme: a vocabulary entry spells its bytes through bytes_to_unicode). It does
not encode: the engine's `ptl tokenizer encode` gives the ids of a text.
"""

import hashlib
import json


def bytes_to_unicode():
    """GPT-2's map from the 256 byte values to printable characters (engine/tokenizer.h)."""
    keep = (
        list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    )
    chars = keep[:]
    n = 0
    for b in range(256):
        if b not in keep:
            keep.append(b)
            chars.append(256 + n)
            n += 1
    return dict(zip(keep, map(chr, chars)))


def token_bytes_table(tokenizer_json):
    """id -> the bytes the token stands for (a special token: its text), from tokenizer.json text."""
    root = json.loads(tokenizer_json)
    to_byte = {c: b for b, c in bytes_to_unicode().items()}
    table = {}
    for spelling, i in root["model"]["vocab"].items():
        if all(c in to_byte for c in spelling):
            table[int(i)] = bytes(to_byte[c] for c in spelling)
        else:  # outside the byte map: its own UTF-8 (as the engine and Hugging Face read it)
            table[int(i)] = spelling.encode("utf-8")
    for added in root.get("added_tokens") or []:
        table[int(added["id"])] = added["content"].encode("utf-8")
    return table


class CheckpointTokenizer:
    """The tokenizer of a checkpoint's metadata: .type, .vocab_size, .sha256 and decode(ids)."""

    def __init__(self, metadata):
        tok = json.loads(metadata.get("tokenizer", '{"type": "byte", "vocab_size": 256}'))
        self.type = tok.get("type")
        if self.type not in ("byte", "bpe", "none"):
            raise ValueError(f"tokenizer {tok} is not one python_ref reads (byte, bpe, none)")
        self.vocab_size = int(tok.get("vocab_size", 256))
        self.sha256 = tok.get("sha256")
        self.table = None
        if self.type == "bpe":
            text = metadata.get("tokenizer_json")
            if text is None:
                raise ValueError("the tokenizer is BPE but the metadata has no tokenizer_json")
            if hashlib.sha256(text.encode("utf-8")).hexdigest() != self.sha256:
                raise ValueError("tokenizer_json does not match the tokenizer's recorded sha256")
            self.table = token_bytes_table(text)

    def token_bytes(self, i):
        if self.type == "byte":
            return bytes([i])
        if self.type == "none":
            raise ValueError("this model records no tokenizer: its ids stand for no text")
        return self.table[int(i)]

    def decode(self, ids):
        return b"".join(self.token_bytes(i) for i in ids)
