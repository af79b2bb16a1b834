"""Host time per call: back-to-back calls on tiny inputs, one synchronisation per round.

    python scripts/host_time.py [--calls 2000] [--rounds 3]

Prints, per call, the median over the rounds of (wall time / calls) in microseconds, and the
fastest round, for the gpukernels operation and its CuPy and PyTorch equivalents. The inputs
are small enough that the GPU work is negligible: the figure is what Python, the wrapper and
the launch cost on the host.
"""

from __future__ import annotations

import argparse
import statistics
import time

import cupy

import gpukernels as gk


def _per_call_us(function, calls: int, rounds: int) -> tuple[float, float]:
    function()  # plan, compile, warm up
    cupy.cuda.Device().synchronize()
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            function()
        cupy.cuda.Device().synchronize()
        times.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(times), min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    flat = cupy.random.default_rng(0).random(1000, dtype=cupy.float32)
    square = flat[: 64 * 15].reshape(64, 15)
    try:
        import torch
        tflat, tsquare = torch.from_dlpack(flat), torch.from_dlpack(square)
    except ImportError:
        torch = None
    cases = []
    for name, torch_name, kwargs in (("sum", "sum", {}), ("mean", "mean", {}),
                                     ("var", "var", {"correction": 0}),
                                     ("std", "std", {"correction": 0}),
                                     ("argmax", "argmax", {}), ("max", "amax", {})):
        cases.append((f"gk.{name} 1000 float32", lambda n=name: getattr(gk, n)(flat)))
        cases.append((f"gk.{name} (64,15) axis=1",
                      lambda n=name: getattr(gk, n)(square, axis=1)))
        cases.append((f"cupy.{name} 1000 float32", lambda n=name: getattr(cupy, n)(flat)))
        if torch is not None:
            cases.append((f"torch.{torch_name} 1000 float32",
                          lambda n=torch_name, k=kwargs: getattr(torch, n)(tflat, **k)))
            cases.append((f"torch.{torch_name} (64,15) dim=1",
                          lambda n=torch_name, k=kwargs: getattr(torch, n)(tsquare, dim=1, **k)))
    print(cupy.cuda.runtime.getDeviceProperties(0)["name"].decode(), "cupy", cupy.__version__,
          "torch", getattr(torch, "__version__", "-"))
    for label, function in cases:
        median, fastest = _per_call_us(function, args.calls, args.rounds)
        print(f"{label:<40} {median:8.2f} us  (min {fastest:.2f})")


if __name__ == "__main__":
    main()
