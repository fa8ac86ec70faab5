"""The framework's share of ``streameval evaluate``'s CPU: evaluate against a bare loop doing the same checks.

    .venv/bin/python bench/framework_share.py [--events 2000] [--rounds 3] [--callgrind N]

Two workloads, each measured side by side in one process (rounds alternate bare / evaluate):

* ``six``: 2,000 outputs of ~1.7 kB (a JSON answer) with an expected answer of the same length; the
  suite runs exact_match, contains, regex, json_schema, levenshtein similarity and a length regex.
* ``small``: 2,000 outputs of ~200 bytes; exact_match, contains and regex (the per-event cost).

"bare" is a plain loop over the same JSONL file doing the same checks with the same libraries, compiled
once (orjson, regex, jsonschema, rapidfuzz): parse the line, run the checks, combine the scores, write
one small JSON result per line. "evaluate" is :func:`streameval.offline.evaluate_file` (what
``streameval evaluate`` runs, without the CLI's start-up and summary table) on the same file. CPU is
process time (user + system) per output; each cell is the median of the rounds (fastest in brackets).

``--callgrind N`` also counts instructions (``valgrind --tool=callgrind``, which repeats exactly on a
shared box; ``perf stat -e instructions`` is not supported here): for each workload three child runs of
this script under callgrind, each doing the same set-up and a 50-event warm-up, then nothing, the bare
loop or evaluate on N outputs; instructions per output = (run - set-up only run) / N.
Nothing is asserted: numbers only.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import re as stdlib_re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson
import regex
from jsonschema import Draft202012Validator
from rapidfuzz.distance import Levenshtein

ROOT = Path(__file__).resolve().parent.parent
_WORDS = ("the model answers that a river flows north through the valley and the city grows along "
          "its banks while farmers plant wheat in spring and harvest it late in the summer").split()  # fmt: skip

ANSWER_SCHEMA = {"type": "object", "required": ["answer"],
                 "properties": {"answer": {"type": "string"}, "confidence": {"type": "number"}}}  # fmt: skip
STATES = r'"answer"\s*:'
LENGTH = r"^[\s\S]{1,2000}$"

SUITES: dict[str, dict[str, Any]] = {
    "six": {"suites": [{"name": "six", "default": True, "threshold": 0.5, "evaluators": [
        {"evaluator": "exact_match"},
        {"evaluator": "contains"},
        {"evaluator": "regex", "params": {"pattern": STATES}},
        {"evaluator": "json_schema", "params": {"schema": ANSWER_SCHEMA}},
        {"evaluator": "similarity", "params": {"algorithm": "levenshtein"}},
        {"evaluator": "regex", "name": "length", "params": {"pattern": LENGTH}},
    ]}]},
    "small": {"suites": [{"name": "small", "default": True, "threshold": 0.5, "evaluators": [
        {"evaluator": "exact_match"},
        {"evaluator": "contains"},
        {"evaluator": "regex", "params": {"pattern": r"answer\s*(is|:)", "flags": "i"}},
    ]}]},
}  # fmt: skip


def events(workload: str, count: int, seed: int = 11) -> list[bytes]:
    """``count`` event lines of the workload (fixed seed: every run gets the same bytes)."""
    rng = random.Random(seed)
    out = []
    for i in range(count):
        if workload == "six":  # ~1.7 kB JSON answers, a reference sharing ~80 % of the words
            words = [rng.choice(_WORDS) for _ in range(300)]
            ref = [w if rng.random() < 0.8 else rng.choice(_WORDS) for w in words]
            output = orjson.dumps({"answer": " ".join(words), "confidence": 0.9}).decode()
            expected = orjson.dumps({"answer": " ".join(ref), "confidence": 0.9}).decode()
            if i % 10 == 0:
                expected = output  # some exact matches
        else:  # ~200-byte events
            words = [rng.choice(_WORDS) for _ in range(8)]
            output = "The answer is " + " ".join(words)
            expected = words[0] if i % 3 else "nowhere"
        event = {"id": f"out-{i}", "model": f"model-{i % 3}", "input": "Describe the valley.",
                 "output": output, "expected": expected}  # fmt: skip
        out.append(orjson.dumps(event))
    return out


# -- the bare loop ---------------------------------------------------------------------------------
def bare_six() -> Any:
    states, length = regex.compile(STATES), regex.compile(LENGTH)
    validator = Draft202012Validator(ANSWER_SCHEMA)

    def check(event: dict[str, Any]) -> list[float]:
        output, expected = event["output"], event["expected"]
        try:
            schema_ok = validator.is_valid(orjson.loads(output))
        except orjson.JSONDecodeError:
            schema_ok = False
        return [
            float(output == expected),
            float(expected in output),
            float(states.search(output) is not None),
            float(schema_ok),
            Levenshtein.normalized_similarity(output, expected),
            float(length.search(output) is not None),
        ]

    return check


def bare_small() -> Any:
    pattern = regex.compile(r"answer\s*(is|:)", regex.IGNORECASE)

    def check(event: dict[str, Any]) -> list[float]:
        output, expected = event["output"], event["expected"]
        return [float(output == expected), float(expected in output), float(pattern.search(output) is not None)]

    return check


def run_bare(workload: str, src: Path, dst: Path) -> None:
    check = bare_six() if workload == "six" else bare_small()
    with src.open("rb") as lines, dst.open("wb") as out:
        for line in lines:
            event = orjson.loads(line)
            scores = check(event)
            score = sum(scores) / len(scores)
            out.write(orjson.dumps({"id": event["id"], "model": event["model"], "score": score,
                                    "passed": score >= 0.5, "scores": scores}) + b"\n")  # fmt: skip


# -- evaluate --------------------------------------------------------------------------------------
class Evaluate:
    def __init__(self, workload: str, workdir: Path) -> None:
        from streameval.config import parse_config_text

        self.text = orjson.dumps(SUITES[workload]).decode()  # JSON is YAML
        self.suites = parse_config_text(self.text, file="bench.json")[1]
        self.workdir = workdir

    def run(self, src: Path) -> None:
        from streameval.offline import evaluate_file
        from streameval.pipeline import Pipeline

        out, dead = self.workdir / "results.jsonl", self.workdir / "dead.jsonl"
        asyncio.run(evaluate_file(Pipeline(self.suites), src, out, dead))


def cpu_per_output(run: Any, count: int) -> float:
    started = time.process_time()
    run()
    return (time.process_time() - started) / count * 1e6


def measure(workload: str, count: int, rounds: int, workdir: Path) -> tuple[list[float], list[float]]:
    src = workdir / f"{workload}.jsonl"
    src.write_bytes(b"".join(line + b"\n" for line in events(workload, count)))
    evaluate = Evaluate(workload, workdir)
    warm = workdir / "warm.jsonl"
    warm.write_bytes(b"".join(line + b"\n" for line in events(workload, 50)))
    run_bare(workload, warm, workdir / "bare.jsonl")
    evaluate.run(warm)
    bare, framework = [], []
    for _ in range(rounds):
        bare.append(cpu_per_output(lambda: run_bare(workload, src, workdir / "bare.jsonl"), count))
        framework.append(cpu_per_output(lambda: evaluate.run(src), count))
    return bare, framework


def child(workload: str, mode: str, count: int) -> None:
    """One callgrind run: set-up and warm-up, then ``mode`` (none, bare, evaluate) on ``count`` outputs."""
    with tempfile.TemporaryDirectory(prefix="bench-share-") as tmp:
        workdir = Path(tmp)
        src, warm = workdir / "in.jsonl", workdir / "warm.jsonl"
        src.write_bytes(b"".join(line + b"\n" for line in events(workload, count)))
        warm.write_bytes(b"".join(line + b"\n" for line in events(workload, 50, seed=3)))
        evaluate = Evaluate(workload, workdir)
        run_bare(workload, warm, workdir / "bare.jsonl")
        evaluate.run(warm)
        if mode == "bare":
            run_bare(workload, src, workdir / "bare.jsonl")
        elif mode == "evaluate":
            evaluate.run(src)


_COLLECTED = stdlib_re.compile(rb"Collected : (\d+)")


def instructions(workload: str, mode: str, count: int) -> int:
    proc = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, __file__,
         "--child", workload, mode, str(count)],
        capture_output=True, check=True,
    )  # fmt: skip
    found = _COLLECTED.search(proc.stderr)
    if found is None:
        raise RuntimeError(f"no instruction count in callgrind's output: {proc.stderr[-500:]!r}")
    return int(found.group(1))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workload", choices=["six", "small", "both"], default="both")
    parser.add_argument("--callgrind", type=int, default=0, metavar="N", help="also count instructions on N outputs")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], args.child[1], int(args.child[2]))
        return 0
    workloads = ["six", "small"] if args.workload == "both" else [args.workload]
    print(f"{args.events} outputs x {args.rounds} rounds; CPU µs per output: median (fastest)")
    with tempfile.TemporaryDirectory(prefix="bench-share-") as tmp:
        for workload in workloads:
            bare, framework = measure(workload, args.events, args.rounds, Path(tmp))
            ratio = statistics.median(framework) / statistics.median(bare)
            print(f"{workload:6} bare {statistics.median(bare):7.1f} ({min(bare):.1f})   evaluate "
                  f"{statistics.median(framework):7.1f} ({min(framework):.1f})   ratio {ratio:.3f} "
                  f"(fastest {min(framework) / min(bare):.3f})", flush=True)  # fmt: skip
    for workload in workloads if args.callgrind else []:
        base = instructions(workload, "none", args.callgrind)
        bare_i = (instructions(workload, "bare", args.callgrind) - base) / args.callgrind
        eval_i = (instructions(workload, "evaluate", args.callgrind) - base) / args.callgrind
        print(f"{workload:6} instructions per output (callgrind, {args.callgrind} outputs): bare {bare_i:,.0f}   "
              f"evaluate {eval_i:,.0f}   ratio {eval_i / bare_i:.3f}", flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
