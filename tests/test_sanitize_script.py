"""scripts/sanitize.sh's verdicts, checked without a GPU: a stand-in for compute-sanitizer runs
the program and prints a summary with a chosen error count, over small throwaway test files."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import gpukernels

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "sanitize.sh"

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")

# Skips compute-sanitizer's options (each takes a value), runs the program, then prints a summary
# whose error count comes from STUB_ERRORS_<tool>; exits like compute-sanitizer --error-exitcode.
STUB = textwrap.dedent("""\
    #!/usr/bin/env bash
    tool=memcheck
    while [ $# -gt 0 ] && [ "${1#--}" != "$1" ]; do
        [ "$1" = --tool ] && tool=$2
        shift 2
    done
    "$@"
    status=$?
    variable=STUB_ERRORS_$tool
    errors=${!variable:-0}
    if [ "$tool" = racecheck ]; then
        echo "========= RACECHECK SUMMARY: $errors hazards displayed ($errors errors, 0 warnings)"
    else
        echo "========= ERROR SUMMARY: $errors errors"
    fi
    [ "$errors" = 0 ] || exit 86
    exit $status
""")


@pytest.fixture
def sandbox(tmp_path):
    stub = tmp_path / "compute-sanitizer"
    stub.write_text(STUB)
    stub.chmod(0o755)
    (tmp_path / "test_ok.py").write_text(
        "def test_one():\n    pass\n\n\ndef test_two():\n    pass\n")
    (tmp_path / "test_fails.py").write_text("def test_fails():\n    assert False\n")
    return tmp_path


def run_script(sandbox, *args, **errors):
    # No GPU for the script's own import of gpukernels: nothing to compile, on any machine.
    env = dict(os.environ, COMPUTE_SANITIZER=str(sandbox / "compute-sanitizer"),
               PYTHON=sys.executable, CUDA_VISIBLE_DEVICES="")
    env.update({f"STUB_ERRORS_{tool}": str(count) for tool, count in errors.items()})
    return subprocess.run(["bash", str(SCRIPT), "--log-dir", str(sandbox / "logs"), *args],
                          capture_output=True, text=True, env=env, timeout=300)


def verdicts(output: str) -> dict[str, str]:
    """tool -> the verdict column of the script's closing table."""
    table = output[output.rindex("\ntool "):].splitlines()[2:]
    return {line.split()[0]: line for line in table if line.split()[0] in
            ("memcheck", "racecheck", "synccheck", "initcheck")}


def test_clean_tools_pass_and_sanitizer_errors_fail(sandbox):
    result = run_script(sandbox, "--tool", "memcheck,racecheck", "--all-tests", "--marker", "",
                        "--", str(sandbox / "test_ok.py"), racecheck=3)
    assert result.returncode == 1, result.stdout + result.stderr
    table = verdicts(result.stdout)
    assert table["memcheck"].rstrip().endswith("ok"), table
    assert "2 passed" in table["memcheck"]
    assert "FAILED" in table["racecheck"] and "sanitizer errors: 3" in table["racecheck"], table
    assert (sandbox / "logs" / "memcheck.log").is_file()


def test_failing_test_fails_the_tool(sandbox):
    result = run_script(sandbox, "--tool", "synccheck", "--all-tests", "--marker", "",
                        "--", str(sandbox / "test_fails.py"), str(sandbox / "test_ok.py"))
    assert result.returncode == 1, result.stdout + result.stderr
    line = verdicts(result.stdout)["synccheck"]
    assert "1 failed, 2 passed" in line and "failed tests" in line, line


def test_run_without_any_test_fails(sandbox):
    # The default marker selects GPU tests; the sandbox has none, so nothing runs.
    result = run_script(sandbox, "--tool", "initcheck", "--", str(sandbox / "test_ok.py"))
    assert result.returncode == 1, result.stdout + result.stderr
    line = verdicts(result.stdout)["initcheck"]
    assert "no test passed" in line and "2 deselected" in line, line


def test_usage_and_bad_arguments(sandbox):
    help_text = subprocess.run(["bash", str(SCRIPT), "--help"], capture_output=True, text=True)
    assert help_text.returncode == 0
    for word in ("memcheck", "racecheck", "synccheck", "initcheck", "--padding", "-lineinfo"):
        assert word in help_text.stdout, word
    bad = run_script(sandbox, "--tool", "leakcheck")
    assert bad.returncode == 2 and "unknown tool" in bad.stderr
    missing = subprocess.run(["bash", str(SCRIPT), "--tool", "memcheck"], capture_output=True,
                             text=True, env=dict(os.environ, COMPUTE_SANITIZER="/nonexistent"))
    assert missing.returncode == 2 and "compute-sanitizer not found" in missing.stderr


def test_cover_without_a_launch_record_fails(sandbox):
    # Tests outside tests/ are not recorded: --cover must stop, not run the tools over nothing.
    result = run_script(sandbox, "--cover", "--tool", "memcheck", "--marker", "",
                        "--", str(sandbox / "test_ok.py"))
    assert result.returncode == 1, result.stdout + result.stderr
    assert "wrote no launch record" in result.stderr
    assert "=== memcheck" not in result.stdout


# scripts/launch_cover.py, on records written by hand.
def _launch_cover():
    spec = importlib.util.spec_from_file_location("launch_cover", SCRIPT.parent / "launch_cover.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _write_record(path, lines):
    path.write_text("".join(json.dumps({"test": t, "seconds": s, "kernels": k,
                                        "random": t.startswith("p::")}) + "\n"
                            for t, s, k in lines))
    return path


RECORD = [
    ("t::a", 5.0, ["f.cu:a", "f.cu:b", "f.cu:c"]),  # everything, but slow
    ("t::b", 0.1, ["f.cu:a", "f.cu:b"]),
    ("t::c", 0.1, ["f.cu:c"]),
    ("t::d", 0.01, []),
    ("t::e", 0.2, ["f.cu:b", "unknown"]),
    ("p::f", 0.001, ["f.cu:a", "f.cu:b", "f.cu:c", "f.cu:d"]),  # a property test: never chosen
]


def test_cover_chooses_cheap_tests_that_launch_every_instance(tmp_path):
    cover = _launch_cover()
    record = cover.read_record(_write_record(tmp_path / "native.jsonl", RECORD))
    assert cover.launched(record) == {"f.cu:a", "f.cu:b", "f.cu:c"}
    assert cover.launched(record, random=True) == {"f.cu:a", "f.cu:b", "f.cu:c", "f.cu:d"}
    chosen = cover.choose(record)
    assert sorted(chosen) == ["t::b", "t::c"]
    out = tmp_path / "cover.txt"
    assert cover.main(["choose", str(tmp_path / "native.jsonl"), "--out", str(out)]) == 0
    assert sorted(out.read_text().split()) == ["t::b", "t::c"]


def test_cover_check_fails_on_a_missed_instance(tmp_path, capsys):
    cover = _launch_cover()
    native = _write_record(tmp_path / "native.jsonl", RECORD)
    full = _write_record(tmp_path / "full.jsonl", [("t::b", 1.0, ["f.cu:a", "f.cu:b"]),
                                                   ("t::c", 1.0, ["f.cu:c"])])
    short = _write_record(tmp_path / "short.jsonl", [("t::b", 1.0, ["f.cu:a", "f.cu:b"])])
    assert cover.main(["check", str(native), str(full)]) == 0
    assert cover.main(["check", str(native), str(short)]) == 1
    assert "f.cu:c" in capsys.readouterr().out
    empty = _write_record(tmp_path / "empty.jsonl", [("t::d", 1.0, [])])
    assert cover.main(["check", str(empty), str(full)]) == 1  # a record without launches


def test_suite_records_launches_and_runs_a_selection(tmp_path):
    """tests/conftest.py: GPUKERNELS_SELECT keeps the listed tests, GPUKERNELS_LAUNCH_RECORD
    writes a line per test that ran; on a GPU the line names the kernel instance."""
    chosen = ["tests/test_transpose.py::test_transpose_matches_numpy[int32-index-naive-float32-31x37]"]
    select = tmp_path / "select.txt"
    select.write_text("\n".join(chosen) + "\n")
    record = tmp_path / "record.jsonl"
    env = dict(os.environ, GPUKERNELS_SELECT=str(select), GPUKERNELS_LAUNCH_RECORD=str(record))
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                             "tests/test_transpose.py"], cwd=SCRIPT.parent.parent,
                            capture_output=True, text=True, env=env, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = [json.loads(line) for line in record.read_text().splitlines()]
    assert [line["test"] for line in lines] == chosen
    if gpukernels.gpu_available():
        assert lines[0]["kernels"] == ["transpose/transpose.cu:transpose_naive<unsigned int, int>"]
    else:
        assert lines[0]["kernels"] == []
