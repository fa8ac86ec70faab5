"""Regenerate examples/events.jsonl: realistic model outputs across categories and models.

Deterministic (seeded), so the committed file and this script agree: ``python examples/make_events.py``.
A handful of lines are deliberately invalid, to show the dead-letter path.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

MODELS = ["gpt-4o", "claude-3-5-sonnet", "qwen2.5-72b-instruct", "llama-3.1-8b-instruct"]
# how often each model gets things right / slightly off / wrong (llama is the weak one)
SKILL = {
    "gpt-4o": (0.75, 0.2),
    "claude-3-5-sonnet": (0.7, 0.22),
    "qwen2.5-72b-instruct": (0.6, 0.25),
    "llama-3.1-8b-instruct": (0.4, 0.3),
}

QA = [
    ("What is the capital of Australia?", "Canberra", "Canberra is the capital of Australia.", "Sydney"),
    ("北京是哪个国家的首都？", "中国", "北京是中国的首都。", "日本"),
    ("Who wrote 'Pride and Prejudice'?", "Jane Austen", "It was written by Jane Austen.", "Charlotte Brontë"),
    ("What is the chemical symbol for gold?", "Au", "The symbol is Au.", "Ag"),
    ("How many continents are there?", "7", "There are 7 continents.", "5"),
    ("水的化学式是什么？", "H2O", "水的化学式是 H2O。", "CO2"),
    ("Which planet is known as the Red Planet?", "Mars", "Mars, the Red Planet.", "Jupiter"),
    (
        "What is the largest ocean on Earth?",
        "Pacific Ocean",
        "The Pacific Ocean is the largest.",
        "Atlantic Ocean",
    ),
    ("In which year did the Berlin Wall fall?", "1989", "The wall fell in 1989.", "1991"),
    ("长城位于哪个国家？", "中国", "长城位于中国。", "蒙古"),
]
MATH = [(a, b) for a, b in [(17, 23), (48, 12), (125, 8), (99, 99), (256, 4), (37, 41)]]
TRANSLATION = [
    (
        "Translate to Chinese: The weather is nice today.",
        "今天天气很好。",
        "今天的天气不错。",
        "明天会下雨。",
    ),
    (
        "Translate to English: 我喜欢读书。",
        "I like reading books.",
        "I enjoy reading books.",
        "I like to cook.",
    ),
    (
        "Translate to English: 这家餐厅的服务很好。",
        "The service at this restaurant is very good.",
        "This restaurant has very good service.",
        "The food here is cold.",
    ),
    ("Translate to Chinese: Please close the door.", "请关门。", "请把门关上。", "请开窗。"),
]
SUMMARIES = [
    (
        "Summarize: The city council voted on Tuesday to expand the bike lane network by 40 km over two years, "
        "citing a 30% rise in cycling since 2020.",
        "The council approved a 40 km bike lane expansion over two years after cycling rose 30% since 2020.",
        "The city council voted to add 40 km of bike lanes in two years because cycling grew 30%.",
        "The council discussed traffic.",
    ),
    (
        "Summarize: Researchers found that a new battery chemistry retains 90% capacity after 5,000 cycles, "
        "which could double the lifespan of electric vehicle packs.",
        "A new battery chemistry keeps 90% capacity after 5,000 cycles and could double EV battery life.",
        "New batteries keep 90% of capacity after 5,000 cycles, possibly doubling EV pack lifespan.",
        "Batteries are important for cars.",
    ),
]
PEOPLE = [("Ada Lovelace", 36), ("Alan Turing", 41), ("Grace Hopper", 85), ("李白", 61)]
CREATIVE = [
    "Write a haiku about autumn.",
    "Write a two-sentence horror story.",
    "写一句关于春天的诗。",
]
CREATIVE_OUT = [
    "Crimson leaves drifting / the old maple lets them go / wind carries the year",
    "I heard my mother call me from the kitchen. As I ran down, she pulled me into the closet and whispered, "
    "'I heard it too.'",
    "春风拂面柳丝长，桃花映水满庭香。",
    "As an AI language model, I cannot write stories.",
    "",
]


def pick(rng: random.Random, model: str, good: str, ok: str, bad: str) -> str:
    right, close = SKILL[model]
    roll = rng.random()
    return good if roll < right else ok if roll < right + close else bad


def events(rng: random.Random) -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    n = 0

    def add(**fields: object) -> None:
        nonlocal n
        n += 1
        event = {"id": f"demo-{n:04d}", **fields}
        out.append(event)

    for _ in range(5):
        for model in MODELS:
            for question, answer, long_answer, wrong in QA[: 5 + rng.randrange(6)]:
                category = rng.choice(["qa_simple", "qa_simple", "factual_accuracy"])
                add(
                    model=model,
                    category=category,
                    input=question,
                    expected=answer,
                    output=pick(rng, model, answer, long_answer, wrong),
                    tags=["prod"],
                )
    for model in MODELS:
        for a, b in MATH:
            good = f"{a} × {b} = {a * b}. The answer is {a * b}."
            add(
                model=model,
                category="math_reasoning",
                input=f"What is {a} * {b}?",
                expected=str(a * b),
                output=pick(
                    rng, model, good, f"Answer: {a * b}", f"The answer is {a * b + rng.randint(1, 9)}."
                ),
            )
        for prompt, ref, alt, bad in TRANSLATION:
            add(
                model=model,
                category="translation",
                input=prompt,
                references=[ref, alt],
                output=pick(rng, model, ref, alt, bad),
                metadata={"lang_pair": "en-zh"},
            )
        for prompt, ref, alt, bad in SUMMARIES:
            add(
                model=model,
                category="summarization",
                input=prompt,
                references=[ref],
                output=pick(rng, model, ref, alt, bad),
            )
        for name, age in PEOPLE:
            good = json.dumps({"name": name, "age": age}, ensure_ascii=False)
            add(
                model=model,
                category="code_generation",
                tags=["json"],
                input=f"Return JSON with the name and age at death of {name}.",
                output=pick(
                    rng, model, good, f"```json\n{good}\n```", json.dumps({"name": name, "age": str(age)})
                ),
            )
        for prompt in CREATIVE:
            add(
                model=model,
                category="creative_writing",
                input=prompt,
                output=CREATIVE_OUT[
                    rng.randrange(len(CREATIVE_OUT)) if SKILL[model][0] < 0.6 else rng.randrange(3)
                ],
            )
    rng.shuffle(out)
    return out


INVALID = [
    b'{"id": "bad-1", "model": "gpt-4o"}',  # no output
    b'{"id": "bad-2", "model": "gpt-4o", "output": 42}',  # output is not a string
    b"this is not JSON at all",
    b'{"id": "bad-4", "model": "gpt-4o", "output": "hi", "suite": "does-not-exist"}',  # unknown suite
    b'{"id": "bad-5", "model": "gpt-4o", "output": "hi", "timestamp": "yesterday"}',  # bad timestamp
    b'{"id": "bad-6", "model": "claude-3-5-sonnet", "output": "truncated',  # cut off mid-event
]


def main() -> None:
    rng = random.Random(7)
    lines = [json.dumps(e, ensure_ascii=False).encode() for e in events(rng)]
    for i, bad in enumerate(INVALID):
        lines.insert((i + 1) * len(lines) // (len(INVALID) + 1), bad)
    lines.append(lines[10])  # a redelivered event: counted once, its stored result published again
    path = Path(__file__).with_name("events.jsonl")
    path.write_bytes(b"\n".join(lines) + b"\n")
    print(f"wrote {len(lines)} lines ({len(INVALID)} invalid, 1 duplicate) to {path}")


if __name__ == "__main__":
    main()
