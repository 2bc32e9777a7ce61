#!/usr/bin/env python3
"""A synthetic instruction-following task as SFT JSONL (docs/post-training.md).

    python3 scripts/make_sft_task.py --task reverse --train 20000 --test 500 --out-dir /tmp/sft

writes OUT/train.jsonl and OUT/test.jsonl, one {"prompt", "response"} per line. The test words
never occur in the training file, so test accuracy measures the skill, not memory.

Tasks:
  reverse  "reverse: planet"  -> "tenalp"   (letters in reverse order)
  upper    "upper: planet"    -> "PLANET"
  add      "add: 23 + 45"     -> "68"       (two-digit numbers)
"""

import argparse
import json
import os
import random

VOWELS = "aeiou"
CONSONANTS = "bcdfghjklmnprstvwz"


def word(rng, lo, hi):
    """A pronounceable pseudo-word: consonant-vowel patterns of lo..hi letters."""
    n = rng.randint(lo, hi)
    return "".join(
        rng.choice(CONSONANTS if i % 2 == 0 else VOWELS)
        if rng.random() < 0.85
        else rng.choice("abcdefghijklmnopqrstuvwxyz")
        for i in range(n)
    )


def example(task, rng, lo, hi):
    if task == "add":
        a, b = rng.randint(10, 99), rng.randint(10, 99)
        return f"{a} + {b}", {"prompt": f"add: {a} + {b}", "response": str(a + b)}
    w = word(rng, lo, hi)
    if task == "reverse":
        return w, {"prompt": f"reverse: {w}", "response": w[::-1]}
    if task == "upper":
        return w, {"prompt": f"upper: {w}", "response": w.upper()}
    raise ValueError(task)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--task", choices=["reverse", "upper", "add"], default="reverse")
    ap.add_argument("--train", type=int, default=20000, help="training examples (default 20000)")
    ap.add_argument(
        "--test", type=int, default=500, help="test examples, none of whose words is in training (default 500)"
    )
    ap.add_argument("--min-len", type=int, default=3, help="shortest word (reverse, upper; default 3)")
    ap.add_argument("--max-len", type=int, default=6, help="longest word (default 6)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out-dir", required=True, help="folder for train.jsonl and test.jsonl")
    args = ap.parse_args()
    if args.train < 1 or args.test < 1:
        ap.error("--train and --test must be at least 1")
    if not 1 <= args.min_len <= args.max_len:
        ap.error(f"need 1 <= --min-len <= --max-len, got {args.min_len} and {args.max_len}")
    # Distinct test words (or sums) must exist, and leave others for training: at most half of them.
    distinct = 90 * 90 if args.task == "add" else sum(26**n for n in range(args.min_len, args.max_len + 1))
    if args.test > distinct // 2:
        ap.error(
            f"--test {args.test} is more than half of the {distinct} distinct {args.task} prompts; "
            "ask for fewer (or longer words)"
        )

    rng = random.Random(args.seed)
    test, test_keys = [], set()
    while len(test) < args.test:
        key, ex = example(args.task, rng, args.min_len, args.max_len)
        if key not in test_keys:
            test_keys.add(key)
            test.append(ex)
    train = []
    while len(train) < args.train:
        key, ex = example(args.task, rng, args.min_len, args.max_len)
        if key not in test_keys:
            train.append(ex)
    os.makedirs(args.out_dir, exist_ok=True)
    for name, rows in (("train.jsonl", train), ("test.jsonl", test)):
        with open(os.path.join(args.out_dir, name), "w") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")
    print(f"wrote {len(train)} training and {len(test)} test examples ({args.task}) to {args.out_dir}")


if __name__ == "__main__":
    main()
