"""``python -m gpukernels``: check every rung against NumPy and time it against its ceiling."""

from __future__ import annotations

import argparse
import sys

OPERATIONS = ("transpose", "matmul", "sum")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m gpukernels",
        description=(
            "Validate every rung of every operation against NumPy on fresh random data, then "
            "time it (CUDA events, median after warm-up) next to the device's own ceiling "
            "measured in the same run: a device-to-device copy for transpose, cuBLAS "
            "(cupy.matmul) for matmul, CUB (cupy.sum) for sum. Prints one table; exits 1 if "
            "any rung gave a wrong answer."
        ),
    )
    parser.add_argument("--ops", nargs="+", choices=OPERATIONS, default=list(OPERATIONS),
                        metavar="OP", help=f"operations to run (default: all of {', '.join(OPERATIONS)})")
    parser.add_argument("--quick", action="store_true",
                        help="small sizes for a smoke run (they fit in the L2: not for reporting)")
    parser.add_argument("--json", metavar="PATH",
                        help="also write every measurement, the device and library versions to PATH")
    args = parser.parse_args(argv)

    from . import _device, benchmark

    if not _device.gpu_available():
        _device.require_gpu()  # raises NoGPUError with the reason
    rows = benchmark.main_job(tuple(args.ops), quick=args.quick,
                              progress=lambda msg: print(msg, file=sys.stderr, flush=True))
    env = benchmark.environment()
    print(f"{env['device']} (sm_{env['compute_capability'].replace('.', '')}, "
          f"{env['multiprocessors']} SMs), CuPy {env['cupy']}, {env['date']}")
    print(benchmark.format_table(rows))
    if args.json:
        benchmark.write_json(rows, args.json)
    wrong = [r for r in rows if r.correct is False]
    if wrong:
        print(f"\n{len(wrong)} wrong result(s): " + ", ".join(f"{r.operation}/{r.method}" for r in wrong))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
