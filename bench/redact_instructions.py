"""Instructions per event of the redaction step (``Redactor.event``) under callgrind, load-independent.

    .venv/bin/python bench/redact_instructions.py [--events 400] [--against DIR ...]

For each row of bench/redact.py (short texts with values, 2 KB with values, 2 KB without), runs
``Redactor.event`` on ``--events`` fixed events (the same texts every run, ``PYTHONHASHSEED=0``) under
``valgrind --tool=callgrind``, and once making the same events without redacting them; the difference
divided by the events is the instructions of one event. ``--against DIR`` measures another checkout's ``stream/`` in the same
run (e.g. a ``git worktree`` of the commit before a change) and prints the ratio. Needs valgrind.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROWS = ("short", "long", "none")


def child(row: str, events: int) -> None:
    """Runs under callgrind: makes ``events`` events of every row, then redacts those of ``row`` ("setup":
    none, so the difference is the redaction alone)."""
    sys.path.insert(0, str(HERE))
    import uuid

    import orjson
    from redact import events as make_events

    from streameval.features.redact import RedactConfig, Redactor
    from streameval.models import RequestEvent

    counter = iter(range(10**9))
    uuid.uuid4 = lambda: uuid.UUID(int=next(counter) * 7919)  # type: ignore[assignment]  # fixed texts
    rows = {
        name: [
            RequestEvent.model_validate(orjson.loads(raw))
            for raw in make_events(events, long=name != "short", values=name != "none")
        ]
        for name in ROWS
    }
    redactor = Redactor(RedactConfig(), key=b"k" * 32)
    for parsed in rows.values():
        redactor.event(parsed[0])  # warm: compiled patterns, caches
    for event in rows.get(row, []):
        redactor.event(event)


def instructions(python: str, tree: Path | None, row: str, events: int) -> int:
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    with tempfile.TemporaryDirectory() as tmp:
        if tree is not None:  # import that checkout's stream/ as streameval
            (Path(tmp) / "streameval").symlink_to(tree.resolve() / "stream")
            env["PYTHONPATH"] = tmp
        out = Path(tmp) / "callgrind.out"
        subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                f"--callgrind-out-file={out}",
                python,
                __file__,
                "--child",
                row,
                "--events",
                str(events),
            ],
            env=env,
            check=True,
            capture_output=True,
        )
        summary = re.search(r"^summary: (\d+)", out.read_text(), re.MULTILINE)
        assert summary is not None
        return int(summary.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=400)
    parser.add_argument("--against", type=Path, action="append", default=[], help="another checkout")
    parser.add_argument("--child", choices=(*ROWS, "setup"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.events)
        return
    trees: list[tuple[str, Path | None]] = [("this checkout", None)] + [(str(t), t) for t in args.against]
    # every run is a valgrind of its own (minutes each: most of it is the interpreter's start-up), two at a time
    runs = [(tree, row) for _, tree in trees for row in (*ROWS, "setup")]
    with ThreadPoolExecutor(2) as pool:
        counts = dict(
            zip(
                runs, pool.map(lambda run: instructions(sys.executable, *run, args.events), runs), strict=True
            )
        )
    print(f"instructions per Redactor.event ({args.events} events, callgrind, PYTHONHASHSEED=0)")
    for row in ROWS:
        base = None
        for label, tree in trees:
            per_event = (counts[tree, row] - counts[tree, "setup"]) / args.events
            ratio = f"  {per_event / base:.3f}x this checkout" if base else ""
            base = base or per_event
            print(f"{row:<6} {label:<40} {per_event:>12,.0f}{ratio}")


if __name__ == "__main__":
    main()
