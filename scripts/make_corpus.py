#!/usr/bin/env python3
"""A modern plain-English corpus, generated procedurally (no external text, so it ships freely).

Short everyday stories (commutes, kitchens, offices, weather, phones, shops, weekends) built from
sentence templates and word lists: a different style from TinyShakespeare (present-day words,
prose paragraphs instead of verse and speaker names), used to show LoRA style adaptation
(docs/post-training.md).

    python3 scripts/make_corpus.py --seed 1 --bytes 400000 > modern_train.txt
    python3 scripts/make_corpus.py --seed 2 --bytes 50000 > modern_heldout.txt

The same seed always gives the same text (Python's random.Random is stable across versions for
these calls: seed, randrange, choice).
"""

import argparse
import random
import sys

NAMES = [
    "Maria",
    "James",
    "Priya",
    "Tom",
    "Aisha",
    "Daniel",
    "Chen",
    "Sofia",
    "Omar",
    "Emma",
    "Lucas",
    "Nina",
    "Ben",
    "Grace",
    "Leo",
    "Hannah",
    "Sam",
    "Olivia",
    "Ravi",
    "Kate",
]
RELATIONS = [
    "her brother",
    "his sister",
    "a neighbour",
    "an old friend",
    "her manager",
    "his flatmate",
    "a colleague",
    "the new intern",
    "her cousin",
    "his dad",
]
PLACES = [
    "the office",
    "the station",
    "the supermarket",
    "the gym",
    "the library",
    "the coffee shop",
    "the park",
    "the airport",
    "the bakery",
    "the hospital",
    "the school gate",
    "the car park",
    "the bus stop",
    "home",
]
TIMES = [
    "On Monday morning",
    "Later that afternoon",
    "Just after lunch",
    "At half past eight",
    "On the way home",
    "Before the meeting",
    "On Saturday",
    "That evening",
    "Early the next day",
    "Around midnight",
]
WEATHER = [
    "It was raining again",
    "The sun was finally out",
    "A cold wind blew down the street",
    "The forecast said it would snow",
    "It was far too hot for September",
    "The fog had not lifted yet",
]
OBJECTS = [
    "laptop",
    "phone",
    "umbrella",
    "coffee",
    "train ticket",
    "shopping list",
    "charger",
    "bike",
    "parcel",
    "headphones",
    "keys",
    "sandwich",
    "notebook",
    "password",
    "email",
    "spreadsheet",
]
ADJ = ["new", "old", "broken", "borrowed", "cheap", "expensive", "tiny", "heavy", "bright", "quiet", "busy", "empty"]
FOOD = ["pasta", "a curry", "soup", "pancakes", "a salad", "toast", "noodles", "tacos", "a pizza", "rice and beans"]
APPS = [
    "the banking app",
    "a video call",
    "the group chat",
    "a delivery app",
    "the weather app",
    "a podcast",
    "the calendar",
    "a map",
]
FEEL = ["tired", "relieved", "annoyed", "happy", "nervous", "bored", "surprised", "hungry", "late", "calm"]

TEMPLATES = [
    "{time}, {name} took the bus to {place}.",
    "{weather}, so {name} grabbed an umbrella and left early.",
    "{name} could not find the {obj} anywhere and felt {feel}.",
    "The {adj} {obj} was on the kitchen table, next to a cold cup of tea.",
    '{name} sent a quick message to {rel}: "Running ten minutes late, sorry!"',
    "At {place}, the queue was longer than usual.",
    "{name} opened {app} and checked the time again.",
    "For dinner, {name} made {food} and watched the news.",
    "{rel_cap} said the meeting had been moved to Thursday.",
    "The train was cancelled, so {name} walked the last two miles.",
    "{name} paid with a card and asked for a receipt.",
    '"Do you want a coffee?" asked {name}. "Yes, please, no sugar," said {name2}.',
    "The Wi-Fi at {place} kept dropping, which made {name} {feel}.",
    "{name} plugged in the {obj} and waited for it to charge.",
    "By six o'clock the office was nearly empty.",
    "{name} and {name2} split the bill and caught the last bus.",
    "{weather}, and the streets outside {place} were quiet.",
    "{name} wrote a short list: milk, bread, eggs and {food}.",
    "The {adj} screen showed forty unread emails.",
    "{time}, {name} called {rel} to ask about the weekend.",
    "There was a long delay at {place} because of roadworks.",
    "{name} turned off the alarm, made toast and read the news on the {obj}.",
    "The delivery arrived at noon, two days later than promised.",
    "{name} felt {feel} after a long day at {place}.",
]


def sentence(rng):
    t = rng.choice(TEMPLATES)
    name = rng.choice(NAMES)
    name2 = rng.choice([n for n in NAMES if n != name])
    rel = rng.choice(RELATIONS)
    return t.format(
        time=rng.choice(TIMES),
        name=name,
        name2=name2,
        place=rng.choice(PLACES),
        weather=rng.choice(WEATHER),
        obj=rng.choice(OBJECTS),
        adj=rng.choice(ADJ),
        feel=rng.choice(FEEL),
        rel=rel,
        rel_cap=rel[0].upper() + rel[1:],
        app=rng.choice(APPS),
        food=rng.choice(FOOD),
    )


def corpus(seed, n_bytes):
    rng = random.Random(seed)
    parts, size = [], 0
    while size < n_bytes:
        para = " ".join(sentence(rng) for _ in range(3 + rng.randrange(4))) + "\n\n"
        parts.append(para)
        size += len(para)
    return "".join(parts)[:n_bytes]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--bytes", type=int, default=400000)
    args = ap.parse_args()
    sys.stdout.write(corpus(args.seed, args.bytes))


if __name__ == "__main__":
    main()
