#!/usr/bin/env python3
"""Choose tests that launch every kernel instance, and check that a run launched them all.

The test suite writes a launch record when ``GPUKERNELS_LAUNCH_RECORD=<file>`` is set (see
tests/conftest.py): one JSON line per test with its id, its duration and the kernel instances
("file:instance") it launched. scripts/sanitize.sh --cover uses this module to run each
sanitizer over far fewer tests than the suite while still launching every instance the suite
launches:

  choose RECORD --out SELECTION   pick tests, fastest per new instance first (a greedy weighted
                                  set cover), until they launch every instance RECORD shows;
                                  write their ids one per line (for GPUKERNELS_SELECT)
  check RECORD RUN                exit 1 unless RUN (a record of the chosen tests, made under a
                                  sanitizer) launched every instance RECORD shows

Both report the compiled instances that no test launched at all.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

UNKNOWN = "unknown"  # what the record says for a kernel no family knows (none is expected)


def read_record(path: Path) -> list[dict]:
    """The record's lines: {"test": id, "seconds": float, "random": bool, "kernels": [...]}.
    A random test (a property test) draws new inputs, so its launches differ between runs: it
    is not chosen, and what only it launched is not asked of a run."""
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def launched(record: list[dict], random: bool = False) -> set[str]:
    """Every instance some test of ``record`` launched (random tests too if ``random``)."""
    return {k for line in record if random or not line.get("random")
            for k in line["kernels"] if k != UNKNOWN}


def choose(record: list[dict]) -> list[str]:
    """Test ids that together launch every instance of ``record``'s tests that are not random:
    each step takes the test with the least seconds per instance not yet launched (ties: the
    earlier test)."""
    left = launched(record)
    candidates = [(line["test"], set(line["kernels"]) & left, max(line["seconds"], 1e-3))
                  for line in record if not line.get("random")]
    chosen = []
    while left:
        test, kernels, _ = min(
            (c for c in candidates if c[1] & left),
            key=lambda c: c[2] / len(c[1] & left))
        chosen.append(test)
        left -= kernels
    return chosen


def compiled_instances() -> set[str]:
    """Every instance the kernel sources compile ("path:instance"); needs no GPU."""
    import gpukernels  # noqa: F401  (registers the sources)
    from gpukernels._core import compile as _compile

    return {f"{source.path}:{instance}"
            for source in _compile.SOURCES.values() for instance in source.instances}


def report_unlaunched(seen: set[str]) -> None:
    never = sorted(compiled_instances() - seen)
    print(f"{len(never)} compiled instance(s) launched by no test" + (":" if never else ""))
    for name in never:
        print(f"  {name}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    pick = commands.add_parser("choose", help="write the ids of a covering set of tests")
    pick.add_argument("record", type=Path)
    pick.add_argument("--out", type=Path, required=True)
    verify = commands.add_parser("check", help="did RUN launch every instance RECORD launched?")
    verify.add_argument("record", type=Path)
    verify.add_argument("run", type=Path)
    args = parser.parse_args(argv)

    record = read_record(args.record)
    wanted = launched(record)
    if not wanted:
        print(f"{args.record}: no test launched a kernel (is there a GPU?)", file=sys.stderr)
        return 1
    if args.command == "choose":
        tests = choose(record)
        args.out.write_text("".join(f"{test}\n" for test in tests))
        seconds = {line["test"]: line["seconds"] for line in record}
        print(f"{len(tests)} of {len(record)} tests launch all {len(wanted)} instances the "
              f"suite launches ({sum(seconds[t] for t in tests):.0f} s of "
              f"{sum(seconds.values()):.0f} s without a sanitizer)")
        drawn = sorted(launched(record, random=True) - wanted)
        if drawn:
            print(f"{len(drawn)} instance(s) launched only by property tests (not asked of a run):")
            for name in drawn:
                print(f"  {name}")
        report_unlaunched(launched(record, random=True))
        return 0
    run = read_record(args.run)
    missing = sorted(wanted - launched(run))
    print(f"{len(run)} tests launched {len(launched(run))} instances; "
          f"{len(missing)} of the {len(wanted)} the suite launches are missing" +
          (":" if missing else ""))
    for name in missing:
        print(f"  {name}")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
