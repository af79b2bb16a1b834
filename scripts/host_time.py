"""Host time per call: back-to-back calls on tiny inputs, one synchronisation per round.

    python scripts/host_time.py [--calls 1000] [--rounds 7]

Prints, per call, the median over the rounds of (wall time / calls) in microseconds, and the
fastest round, for the gpukernels operation and its CuPy and PyTorch equivalents. The inputs
are small enough that the GPU work is negligible: the figure is what Python, the wrapper and
the launch cost on the host. The rounds are interleaved: round r of every case runs before
round r + 1 of any, so a drift of the machine's speed during the run (two runs of the script
have differed by up to 3 us a case) reaches every case alike, and the cases of one run compare.
"""

from __future__ import annotations

import argparse
import statistics
import time

import cupy

import gpukernels as gk


def _round_us(function, calls: int) -> float:
    """Wall time per call of ``calls`` back-to-back calls and one synchronisation, in us."""
    start = time.perf_counter()
    for _ in range(calls):
        function()
    cupy.cuda.Device().synchronize()
    return (time.perf_counter() - start) / calls * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    rng = cupy.random.default_rng(0)
    flat = rng.random(1000, dtype=cupy.float32)
    square = rng.random((64, 64), dtype=cupy.float32)
    half = square.astype(cupy.float16)
    try:
        import torch
        tflat, tsquare = torch.from_dlpack(flat), torch.from_dlpack(square)
    except ImportError:
        torch = None
    cases = []
    # Matmul and transpose of 64 x 64, a permutation of (16, 16, 16), reductions of 1000
    # elements and along axis 1 of (64, 64) (the moments and arg-reductions too), and the
    # same two for cumsum.
    for label, x in (("64x64 float32", square), ("64x64 float16", half)):
        cases.append((f"gk.matmul {label}", lambda x=x: gk.matmul(x, x)))
        cases.append((f"cupy.matmul {label}", lambda x=x: cupy.matmul(x, x)))
        if torch is not None:
            t = torch.from_dlpack(x)
            cases.append((f"torch.matmul {label}", lambda t=t: torch.matmul(t, t)))
    cases.append(("gk.transpose 64x64 float32", lambda: gk.transpose(square)))
    cases.append(("cupy.ascontiguousarray(x.T) 64x64", lambda: cupy.ascontiguousarray(square.T)))
    if torch is not None:
        cases.append(("torch x.T.contiguous() 64x64", lambda: tsquare.T.contiguous()))
    cube = rng.random((16, 16, 16), dtype=cupy.float32)
    cases.append(("gk.permute_dims (16,16,16) (2,0,1)", lambda: gk.permute_dims(cube, (2, 0, 1))))
    cases.append(("cupy.ascontiguousarray(x.transpose)",
                  lambda: cupy.ascontiguousarray(cube.transpose(2, 0, 1))))
    if torch is not None:
        tcube = torch.from_dlpack(cube)
        cases.append(("torch permute().contiguous()",
                      lambda: tcube.permute(2, 0, 1).contiguous()))
    for name, torch_name, kwargs in (("sum", "sum", {}), ("prod", "prod", {}),
                                     ("min", "amin", {}), ("max", "amax", {}),
                                     ("mean", "mean", {}),
                                     ("var", "var", {"correction": 0}),
                                     ("std", "std", {"correction": 0}),
                                     ("argmax", "argmax", {})):
        cases.append((f"gk.{name} 1000 float32", lambda n=name: getattr(gk, n)(flat)))
        cases.append((f"cupy.{name} 1000 float32", lambda n=name: getattr(cupy, n)(flat)))
        if torch is not None:
            cases.append((f"torch.{torch_name} 1000 float32",
                          lambda n=torch_name, k=kwargs: getattr(torch, n)(tflat, **k)))
        cases.append((f"gk.{name} (64,64) axis=1",
                      lambda n=name: getattr(gk, n)(square, axis=1)))
        cases.append((f"cupy.{name} (64,64) axis=1",
                      lambda n=name: getattr(cupy, n)(square, axis=1)))
        if torch is not None:
            cases.append((f"torch.{torch_name} (64,64) dim=1",
                          lambda n=torch_name, k=kwargs: getattr(torch, n)(tsquare, dim=1, **k)))
    cases.append(("gk.cumsum 1000 float32", lambda: gk.cumsum(flat)))
    cases.append(("cupy.cumsum 1000 float32", lambda: cupy.cumsum(flat)))
    if torch is not None:
        cases.append(("torch.cumsum 1000 float32", lambda: torch.cumsum(tflat, 0)))
    cases.append(("gk.cumsum (64,64) axis=1", lambda: gk.cumsum(square, axis=1)))
    cases.append(("cupy.cumsum (64,64) axis=1", lambda: cupy.cumsum(square, axis=1)))
    if torch is not None:
        cases.append(("torch.cumsum (64,64) dim=1", lambda: torch.cumsum(tsquare, 1)))
    print(cupy.cuda.runtime.getDeviceProperties(0)["name"].decode(), "cupy", cupy.__version__,
          "torch", getattr(torch, "__version__", "-"))
    for _, function in cases:  # plan, compile, warm up
        function()
    cupy.cuda.Device().synchronize()
    rounds: dict[str, list[float]] = {label: [] for label, _ in cases}
    for _ in range(args.rounds):
        for label, function in cases:
            rounds[label].append(_round_us(function, args.calls))
    for label, _ in cases:
        print(f"{label:<40} {statistics.median(rounds[label]):8.2f} us  "
              f"(min {min(rounds[label]):.2f})")


if __name__ == "__main__":
    main()
