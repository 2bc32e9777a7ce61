"""Text generation from a TinyGPT checkpoint.

    /usr/bin/python3 -m python_ref.sample CKPT --prompt "ROMEO:" --max-tokens 200 --temperature 0.8

Greedy at temperature 0; otherwise logits / temperature, then top-k, then top-p (nucleus),
then a draw from a seeded torch.Generator. Past the context length the model sees only the
last ctx tokens, with positions restarting at 0 (nanoGPT's crop), as the spec requires.
"""

import argparse
import math
import sys

import torch
import torch.nn.functional as F

from .model import TinyGPT
from .tokenizer import CheckpointTokenizer


def filter_logits(logits, temperature=1.0, top_k=0, top_p=1.0):
    """Probabilities [V] after temperature, top-k and top-p filtering of one row of logits."""
    logits = logits / temperature
    if top_k and 0 < top_k < logits.size(-1):
        kth = torch.topk(logits, top_k).values[-1]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    probs = F.softmax(logits, dim=-1)
    if top_p is not None and top_p < 1.0:
        sorted_probs, order = torch.sort(probs, descending=True)
        cumulative = torch.cumsum(sorted_probs, dim=-1)
        # Keep the smallest prefix whose cumulative probability reaches top_p: a token stays if
        # the mass before it is still below top_p. The most likely token always stays.
        keep_sorted = (cumulative - sorted_probs) < top_p
        keep_sorted[0] = True
        keep = torch.zeros_like(keep_sorted)
        keep[order] = keep_sorted
        probs = torch.where(keep, probs, torch.zeros_like(probs))
        probs = probs / probs.sum()
    return probs


@torch.no_grad()
def generate(model, prompt_bytes, max_tokens, temperature=0.0, top_k=0, top_p=1.0, seed=1337):
    """Generate max_tokens byte tokens after prompt_bytes (bytes or a list of ints).
    Returns the list of generated token ids (the prompt excluded)."""
    model.eval()
    ctx = model.config.ctx
    device = next(model.parameters()).device
    tokens = list(prompt_bytes)
    if not tokens:
        raise ValueError("the prompt must hold at least one token")
    gen = torch.Generator(device="cpu")
    gen.manual_seed(seed)
    out = []
    for _ in range(max_tokens):
        window = torch.tensor([tokens[-ctx:]], dtype=torch.long, device=device)
        logits, _ = model(window)
        last = logits[0, -1].float().cpu()
        if temperature == 0:
            nxt = int(torch.argmax(last))
        else:
            probs = filter_logits(last, temperature, top_k, top_p)
            nxt = int(torch.multinomial(probs, 1, generator=gen))
        tokens.append(nxt)
        out.append(nxt)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description="Sample text from a TinyGPT checkpoint (.tinygpt)")
    ap.add_argument("checkpoint")
    ap.add_argument("--prompt", default="\n")
    ap.add_argument("--max-tokens", type=int, default=200)
    ap.add_argument("--temperature", type=float, default=0.8)
    ap.add_argument("--top-k", type=int, default=0, help="0 = off")
    ap.add_argument("--top-p", type=float, default=1.0, help="1.0 = off")
    ap.add_argument("--seed", type=int, default=1337)
    args = ap.parse_args(argv)
    # The same rules as `ptl sample`.
    if not (args.temperature >= 0 and math.isfinite(args.temperature)):
        ap.error(f"--temperature must be 0 (greedy) or positive, got {args.temperature}")
    if args.top_k < 0:
        ap.error(f"--top-k must be 0 (off) or positive, got {args.top_k}")
    if not 0 < args.top_p <= 1:
        ap.error(f"--top-p must be in (0, 1], got {args.top_p}")
    if args.max_tokens < 0:
        ap.error(f"--max-tokens must be at least 0, got {args.max_tokens}")
    if not args.prompt:
        ap.error("--prompt must not be empty (the default is a newline)")

    model, meta = TinyGPT.from_checkpoint(args.checkpoint, return_metadata=True)
    if CheckpointTokenizer(meta).type != "byte":
        raise ValueError(
            f"{args.checkpoint}: python_ref.sample reads byte-level models (its prompt is bytes); this one reads "
            "a BPE tokenizer: sample it with ptl sample"
        )
    prompt = args.prompt.encode("utf-8")
    tokens = generate(model, prompt, args.max_tokens, args.temperature, args.top_k, args.top_p, args.seed)
    sys.stdout.write((prompt + bytes(tokens)).decode("utf-8", errors="replace"))
    sys.stdout.write("\n")


def cli(argv=None):
    """main() for the command line: a bad file is one line on stderr, not a traceback."""
    try:
        main(argv)
    except (OSError, ValueError) as e:
        sys.exit(f"python_ref.sample: error: {e}")


if __name__ == "__main__":
    cli()
