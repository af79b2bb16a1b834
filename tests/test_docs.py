"""Every docstring example of the package runs and prints what it says.

One test per docstring with examples. Those that use the GPU (CuPy arrays, an input given to
``describe``, a check against NumPy) are marked ``gpu``: they run in the GPU suite and skip
without a GPU; the rest run everywhere, CI included. Examples marked ``# doctest: +SKIP`` are
the ones that write files, take long or print machine-specific figures.
"""

from __future__ import annotations

import doctest
import importlib
import pkgutil
import re

import pytest

import gpukernels

FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
# What makes an example need a GPU: CuPy arrays, launches with an input, a check against NumPy.
NEEDS_GPU = re.compile(r"\bcupy\b|shape=|validation import check|main_job\(")


def _module_names() -> list[str]:
    names = ["gpukernels"]
    for found in pkgutil.walk_packages(gpukernels.__path__, "gpukernels."):
        if not found.name.endswith("__main__"):
            names.append(found.name)
    return names


def _docstrings() -> list[doctest.DocTest]:
    finder = doctest.DocTestFinder(exclude_empty=True)
    found = {}
    for name in _module_names():
        for test in finder.find(importlib.import_module(name), name):
            if any(not example.options.get(doctest.SKIP) for example in test.examples):
                found.setdefault(test.name, test)
    return [found[name] for name in sorted(found)]


def _needs_gpu(test: doctest.DocTest) -> bool:
    return any(NEEDS_GPU.search(example.source) for example in test.examples
               if not example.options.get(doctest.SKIP))


DOCSTRINGS = _docstrings()


def test_the_package_has_docstring_examples():
    assert len(DOCSTRINGS) >= 30
    assert any(_needs_gpu(t) for t in DOCSTRINGS) and not all(_needs_gpu(t) for t in DOCSTRINGS)


@pytest.mark.parametrize(
    "test", [pytest.param(t, id=t.name, marks=[pytest.mark.gpu] if _needs_gpu(t) else [])
             for t in DOCSTRINGS])
def test_docstring_examples(test, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # an example that writes a file writes it here
    output: list[str] = []
    runner = doctest.DocTestRunner(optionflags=FLAGS)
    test.globs = dict(test.globs)
    result = runner.run(test, out=output.append, clear_globs=True)
    assert result.attempted > 0
    assert result.failed == 0, "".join(output)
