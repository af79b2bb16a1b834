"""scripts/sanitize.sh's verdicts, checked without a GPU: a stand-in for compute-sanitizer runs
the program and prints a summary with a chosen error count, over small throwaway test files."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

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
