"""The wheel carries the CUDA sources inside the package and finds them once installed.

Builds from a clean copy of the source tree (so neither a stale ``build/`` directory nor the
checkout itself can supply a file the wheel forgot), installs into a temporary directory and
imports from there in a subprocess, away from the source tree. Takes ~10-20 s.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
KERNEL_FILES = ("transpose/transpose.cu", "transpose/words.cu", "matmul/simt.cu",
                "reduce/reduce.cu", "common.cuh")

pytest.importorskip("build")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    src = tmp_path_factory.mktemp("src") / "gpukernels"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(
        ".git", "build", "dist", "*.egg-info", "__pycache__", ".pytest_cache", ".hypothesis",
        ".scratch", ".whl", "*.whl", ".venv", "venv"))
    out = tmp_path_factory.mktemp("dist")
    proc = subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "-o", str(out), str(src)],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, f"wheel build failed:\n{proc.stdout}\n{proc.stderr}"
    wheels = list(out.glob("gpukernels-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


def test_wheel_contains_kernels_and_package(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for filename in KERNEL_FILES:
        assert f"gpukernels/kernels/{filename}" in names, sorted(names)
    assert "gpukernels/__init__.py" in names
    # Every module of the source package, subpackages included, is in the wheel.
    package = ROOT / "src" / "gpukernels"
    for path in package.rglob("*.py"):
        if "__pycache__" in path.parts:
            continue
        name = "gpukernels/" + path.relative_to(package).as_posix()
        assert name in names, f"{name} is missing from the wheel"
    # Every CUDA source of kernels/ too, so a new header cannot be forgotten.
    sources = [p for p in (ROOT / "kernels").rglob("*") if p.suffix in (".cu", ".cuh")]
    assert len(sources) >= 10
    for path in sources:
        assert f"gpukernels/kernels/{path.relative_to(ROOT / 'kernels').as_posix()}" in names
    assert "gpukernels/py.typed" in names


def test_wheel_console_script_targets_exist(wheel):
    with zipfile.ZipFile(wheel) as zf:
        entry_points = [n for n in zf.namelist() if n.endswith(".dist-info/entry_points.txt")]
        text = zf.read(entry_points[0]).decode() if entry_points else ""
        names = set(zf.namelist())
    for line in text.splitlines():
        if "=" in line and ":" in line:
            module = line.split("=", 1)[1].strip().split(":")[0]
            path = module.replace(".", "/")
            assert f"{path}.py" in names or f"{path}/__init__.py" in names, line


def test_installed_wheel_finds_its_kernels(wheel, tmp_path):
    target = tmp_path / "site"
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--quiet",
         "--target", str(target), str(wheel)],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, f"pip install failed:\n{proc.stdout}\n{proc.stderr}"
    script = textwrap.dedent("""
        import sys
        from pathlib import Path
        import gpukernels
        from gpukernels._core import compile as _compile
        target = Path(sys.argv[1]).resolve()
        package = Path(gpukernels.__file__).resolve()
        assert target in package.parents, f"imported {package}, not the installed wheel"
        kernels = _compile.kernel_dir().resolve()
        assert target in kernels.parents, f"kernel_dir() is {kernels}, outside {target}"
        source = _compile.load_source("transpose/transpose.cu")
        assert "transpose_naive" in source and "struct gk_half" in source
        for path in _compile.SOURCES:
            assert _compile.load_source(path)
        assert gpukernels.__version__ not in ("", "0+unknown")
        print("OK", kernels)
    """)
    env = dict(os.environ, PYTHONPATH=str(target))
    proc = subprocess.run([sys.executable, "-c", script, str(target)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"{proc.stdout}\n{proc.stderr}"
    assert proc.stdout.startswith("OK")


def test_sdist_carries_the_tests_scripts_and_notebook(tmp_path):
    """The source distribution can run the test suite and the tools: MANIFEST.in."""
    src = tmp_path / "src" / "gpukernels"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(
        ".git", "build", "dist", "*.egg-info", "__pycache__", ".pytest_cache", ".hypothesis",
        ".scratch", ".whl", "*.whl", ".venv", "venv", ".baseline"))
    out = tmp_path / "dist"
    proc = subprocess.run(
        [sys.executable, "-m", "build", "--sdist", "--no-isolation", "-o", str(out), str(src)],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, f"sdist build failed:\n{proc.stdout}\n{proc.stderr}"
    (sdist,) = out.glob("gpukernels-*.tar.gz")
    import tarfile

    with tarfile.open(sdist) as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    tracked = [path.relative_to(ROOT).as_posix() for folder in ("tests", "scripts", "notebooks",
                                                                 "kernels")
               for path in (ROOT / folder).rglob("*")
               if path.is_file() and "__pycache__" not in path.parts]
    missing = [path for path in tracked if path not in names]
    assert not missing, missing
    for path in ("README.md", "LICENSE", "pyproject.toml", "benchmarks/NOTES.md",
                 "benchmarks/regenerate.py", ".ci/run", ".ci/constraints.txt",
                 "src/gpukernels/py.typed"):
        assert path in names, path
