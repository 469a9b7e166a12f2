"""Chat-format fine-tuning data the demo and the tests write themselves (the Hub is out of reach):
conversations about sums, in the ``messages`` form TRL's ``SFTTrainer`` reads, with a system turn
on some and a second exchange on others, so that assistant-only loss has prompt tokens to skip."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

SYSTEM = "You add numbers."


def conversation(rng: np.random.Generator) -> list[dict[str, str]]:
    a, b, c = (int(x) for x in rng.integers(0, 50, 3))
    messages = [{"role": "system", "content": SYSTEM}] if rng.random() < 0.5 else []
    messages += [
        {"role": "user", "content": f"What is {a} + {b}?"},
        {"role": "assistant", "content": f"{a} + {b} = {a + b}."},
    ]
    if rng.random() < 0.3:
        messages += [
            {"role": "user", "content": f"And plus {c}?"},
            {"role": "assistant", "content": f"{a + b} + {c} = {a + b + c}."},
        ]
    return messages


def write_chat_examples(path: str | Path, count: int, seed: int = 0) -> Path:
    """``count`` conversations as ``.jsonl`` lines of ``messages``."""
    rng = np.random.default_rng(seed)
    path = Path(path)
    path.write_text("".join(json.dumps({"messages": conversation(rng)}) + "\n" for _ in range(count)))
    return path


# Words of the varied examples; their lengths, in words, are log-normal, as instruction data's are
# (Alpaca's and ShareGPT's turns: most short, a long tail).
WORDS = "the a of to and in is it that for on with as was by this be are from at or an not".split() + (
    "model train data token batch sequence memory kernel graph node tensor layer weight gradient".split()
)
PROMPT_WORDS, ANSWER_WORDS, SPREAD = 24, 80, 0.9  # medians, and sigma of the log


def varied_conversation(rng: np.random.Generator, most_words: int) -> list[dict[str, str]]:
    """A user turn and an answer of log-normal lengths (in words), at most ``most_words`` together."""
    prompt, answer = (
        max(1, min(int(rng.lognormal(np.log(median), SPREAD)), most_words // 2))
        for median in (PROMPT_WORDS, ANSWER_WORDS)
    )
    return [
        {"role": "user", "content": " ".join(rng.choice(WORDS, prompt))},
        {"role": "assistant", "content": " ".join(rng.choice(WORDS, answer))},
    ]


def write_varied_examples(path: str | Path, count: int, most_words: int, seed: int = 0) -> Path:
    """``count`` conversations of ``varied_conversation`` as ``.jsonl`` lines of ``messages``."""
    rng = np.random.default_rng(seed)
    path = Path(path)
    lines = (json.dumps({"messages": varied_conversation(rng, most_words)}) + "\n" for _ in range(count))
    path.write_text("".join(lines))
    return path
