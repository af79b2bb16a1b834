"""Benchmarks: every rung of every ladder, timed against ceilings measured in the same run.

* :mod:`.timing` - how one call is timed, per call (host time included) and held (device work
  alone);
* :mod:`.sweep` - the sweeps over the registry's operations, and the main job of
  ``python -m gpukernels``;
* :mod:`.results` - :class:`Measurement`, :class:`BenchResult` (tables, JSON), the environment;
* :mod:`.plots` - the figures (matplotlib, the ``bench`` extra).

Each operation's benchmark spec (its sweep, ceiling, library peers, work and unit) lives with
the operation, in ``gpukernels/ops/<name>/check.py``.

Examples
--------
>>> from gpukernels import benchmark
>>> result = benchmark.bench("transpose", sizes=(2048, 8192), dtypes=("float32",))  # doctest: +SKIP
>>> result                      # a table in Jupyter: times, GB/s and ratios to the copy  # doctest: +SKIP
>>> result.plot()               # GB/s against size, one line per rung  # doctest: +SKIP
"""

from .results import BenchResult, Measurement, environment, format_table, write_json
from .sweep import (
                    Candidate,
                    Case,
                    bench,
                    main_job,
                    parse_shape,
                    parse_size,
                    resolve_targets,
                    run_case,
                    split_methods,
                    targets,
)
from .timing import QUICK_TIMING, Timing

__all__ = ["BenchResult", "Measurement", "Timing", "QUICK_TIMING", "Case", "Candidate", "bench",
           "main_job", "targets", "resolve_targets", "split_methods", "run_case", "environment",
           "format_table", "write_json", "parse_size", "parse_shape"]
