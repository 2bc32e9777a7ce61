"""SFT data as the engine reads it (engine/sft.h, docs/post-training.md): the byte-level chat
template, and which bytes the loss counts.

    <|system|>\\n{content}\\n          (optional)
    <|user|>\\n{content}\\n
    <|assistant|>\\n{content}<|end|>\\n

The loss counts the assistant's content and the "<|end|>\\n" that closes it. With a mask,
TinyGPT.forward(idx, targets, mask) averages the cross-entropy over the selected positions:
sum(mask * nll) / sum(mask).
"""

import json

END = b"<|end|>"
ASSISTANT = b"<|assistant|>\n"


def render_chat(messages):
    """(bytes, mask): the template applied to [{"role", "content"}, ...]; mask[i] = 1 where the loss counts."""
    out, mask = bytearray(), []

    def put(b, loss):
        out.extend(b)
        mask.extend([1 if loss else 0] * len(b))

    for m in messages:
        content = m["content"].encode("utf-8")
        put(b"<|" + m["role"].encode() + b"|>\n", False)
        if m["role"] == "assistant":
            put(content, True)
            put(END + b"\n", True)
        else:
            put(content + b"\n", False)
    return bytes(out), mask


def reply_mask(row):
    """The loss mask of a packed row, found by scanning for the markers (independent of render_chat)."""
    mask = [0] * len(row)
    pos = 0
    while True:
        start = row.find(ASSISTANT, pos)
        if start < 0:
            return mask
        begin = start + len(ASSISTANT)
        end = row.find(END + b"\n", begin)
        stop = len(row) if end < 0 else end + len(END) + 1
        for i in range(begin, stop):
            mask[i] = 1
        pos = stop


def read_jsonl(path):
    """Examples as message lists: {"prompt","response"} lines become a user and an assistant message."""
    examples = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            j = json.loads(line)
            if "messages" in j:
                examples.append(j["messages"])
            else:
                examples.append(
                    [{"role": "user", "content": j["prompt"]}, {"role": "assistant", "content": j["response"]}]
                )
    return examples
