#!/usr/bin/env bash
# Run the GPU test suite under compute-sanitizer's four tools and fail on any error.
#
#   memcheck   out-of-bounds and misaligned accesses; CuPy's memory pool is turned off
#              (GPUKERNELS_NO_POOL=1) and every allocation padded by 512 bytes (--padding 512),
#              so an access past an array lands outside any allocation, not in a pooled block
#   racecheck  shared-memory data races
#   synccheck  barriers and warp-synchronous instructions used wrongly (divergent __syncthreads,
#              bad masks)
#   initcheck  reads of device memory nothing has written (pool off, as for memcheck)
#
# Kernels are compiled with -lineinfo (GPUKERNELS_LINEINFO=1), so reports name source lines.
# Each tool runs `pytest -q -m "gpu and not slow and not large"`; a tool passes only when the
# sanitizer exits 0, every sanitizer summary in its output reports 0 errors, and the pytest
# summary line shows tests that passed and none that failed or errored (a run that checked no
# test proves nothing). The script prints each tool's time and exits non-zero on any problem.
#
# racecheck and synccheck slow every shared-memory access down, so by default they run only the
# tests of the rungs whose kernels use shared memory, barriers or warp-level synchronisation,
# found at run time (static shared memory of the compiled kernels, or such instructions in
# their source) and selected with pytest -k by rung name (the test ids carry the rung name).
# --all-tests runs them over the whole suite. memcheck and initcheck always run every GPU test.
#
# --cover runs every tool over a subset of the tests instead: the suite first runs without a
# sanitizer (in parallel workers when pytest-xdist is installed) and records which kernel
# instances each test launches (tests/conftest.py, GPUKERNELS_LAUNCH_RECORD);
# scripts/launch_cover.py picks the cheapest tests that together launch all of them, and after
# each tool checks that the tool's run launched every one. A tool then passes only if, in
# addition, no instance was missed. The record is kept in the log directory and reused by a
# later --cover run with the same --log-dir.
#
# usage: scripts/sanitize.sh [options] [-- pytest arguments]
#   --tool NAME     run only this tool (repeatable, or comma-separated); default: all four
#   --all-tests     racecheck and synccheck over the whole GPU suite too
#   --cover         every tool over tests chosen to launch every kernel instance (see above)
#   --large         include the tests marked slow or large (excluded by default: they take
#                   far longer under a sanitizer)
#   --marker EXPR   pytest -m expression instead of "gpu and not slow and not large"
#   --log-dir DIR   where the full log of each tool goes (default: a new temporary directory)
#   -h, --help      this text
# Arguments after -- go to pytest, e.g. test files or `-k sum` (a -k of yours replaces the rung
# selection of racecheck and synccheck).
#
# Environment: PYTHON (default python3), COMPUTE_SANITIZER (default: compute-sanitizer on PATH,
# else /usr/local/cuda/bin/compute-sanitizer).
#
# Examples:
#   scripts/sanitize.sh                                   # all four tools
#   scripts/sanitize.sh --tool memcheck -- tests/test_sum.py -x
#   scripts/sanitize.sh --tool racecheck,synccheck --all-tests
set -uo pipefail

usage() { sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }

tools=()
all_tests=0
cover=0
marker="gpu and not slow and not large"
log_dir=
pytest_args=()
while [ $# -gt 0 ]; do
    case "$1" in
        --tool) [ $# -ge 2 ] || { echo "--tool needs a name" >&2; exit 2; }
                IFS=, read -r -a names <<< "$2"; tools+=("${names[@]}"); shift 2 ;;
        --tool=*) IFS=, read -r -a names <<< "${1#--tool=}"; tools+=("${names[@]}"); shift ;;
        --all-tests) all_tests=1; shift ;;
        --cover) cover=1; shift ;;
        --large) marker="gpu"; shift ;;
        --marker) [ $# -ge 2 ] || { echo "--marker needs an expression" >&2; exit 2; }
                  marker="$2"; shift 2 ;;
        --log-dir) [ $# -ge 2 ] || { echo "--log-dir needs a directory" >&2; exit 2; }
                   log_dir="$2"; shift 2 ;;
        -h|--help) usage; exit 0 ;;
        --) shift; pytest_args=("$@"); break ;;
        *) echo "unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
done
[ ${#tools[@]} -gt 0 ] || tools=(memcheck racecheck synccheck initcheck)
for tool in "${tools[@]}"; do
    case "$tool" in
        memcheck|racecheck|synccheck|initcheck) ;;
        *) echo "unknown tool '$tool': choose memcheck, racecheck, synccheck or initcheck" >&2
           exit 2 ;;
    esac
done

cd "$(dirname "$0")/.." || exit 2
PYTHON=${PYTHON:-python3}
sanitizer=${COMPUTE_SANITIZER:-$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)}
if ! command -v "$sanitizer" > /dev/null 2>&1; then
    echo "compute-sanitizer not found (looked for '$sanitizer'); set COMPUTE_SANITIZER" >&2
    exit 2
fi
[ -n "$log_dir" ] || log_dir=$(mktemp -d "${TMPDIR:-/tmp}/gpukernels-sanitize.XXXXXX")
mkdir -p "$log_dir" || exit 2
export GPUKERNELS_LINEINFO=1
user_k=0
for arg in ${pytest_args[@]+"${pytest_args[@]}"}; do
    case "$arg" in -k|-k*) user_k=1 ;; esac
done

# Compile every kernel with -lineinfo once, outside the sanitizer (CuPy caches the binaries).
"$PYTHON" -c "import gpukernels as gk; print('gpukernels', gk.__version__, '- GPU:', gk.gpu_available())" \
    || { echo "cannot import gpukernels with $PYTHON" >&2; exit 2; }

# Rungs whose kernels use shared memory, barriers or warp-level synchronisation, read from the
# registry: each rung names its source and its kernel.
sync_rungs() {
    "$PYTHON" - <<'EOF'
import re

import gpukernels
import gpukernels._core.device
from gpukernels._core.compile import load_source
from gpukernels._core.ladder import OPERATIONS

synchronising = re.compile(r"__syncthreads|__syncwarp|__shfl|_sync\s*\(|__shared__|"
                           r"cooperative_groups|bar\.sync|barrier|cp\.async")
selected = set()
for op in OPERATIONS.values():
    for rung in op.ladder:
        code = re.sub(r"//[^\n]*|/\*.*?\*/", "", load_source(rung.source.path), flags=re.S)
        kernels = [k.start() for k in re.finditer(r"__global__", code)]
        definition = re.search(rf"\b{re.escape(rung.kernel)}\s*\(", code)
        body = ""
        if definition:
            later = [k for k in kernels if k > definition.end()]
            body = code[definition.start():later[0] if later else len(code)]
        # Helpers the kernel calls may hold its shared memory: ask the compiled kernel too.
        shared = gpukernels.gpu_available() and rung.source.runs_on(
            gpukernels._core.device.compute_capability()) and \
            rung.source.function(rung.instances[0]).shared_size_bytes > 0
        if synchronising.search(body) or shared:
            selected.add(rung.name)
print(" ".join(sorted(selected)))
EOF
}

# The pytest summary line ("12 passed, 3 skipped in 4.5s", or "no tests ran in 0.1s").
pytest_summary() {
    grep -E '^=*[[:space:]]*(no tests ran|([0-9]+ [a-z]+(, )?)+) in [0-9.]+s' "$1" | tail -n 1 \
        | sed -E 's/^=+ //; s/ =+$//'
}
count() {  # count WORD SUMMARY: the number before WORD in the summary line, or 0
    local n
    n=$(grep -oE "[0-9]+ $1" <<< "$2" | head -n 1 | cut -d' ' -f1)
    echo "${n:-0}"
}
# Total errors over every sanitizer summary in a log (one per process); "none" if there is none.
sanitizer_errors() {
    local lines
    lines=$(grep -E '(ERROR SUMMARY: [0-9]+ error|RACECHECK SUMMARY: .*\([0-9]+ error)' "$1")
    if [ -z "$lines" ]; then echo none; return; fi
    grep -oE '(SUMMARY: |\()[0-9]+ error' <<< "$lines" | grep -oE '[0-9]+' \
        | awk '{ total += $1 } END { print total + 0 }'
}

# --cover: record the launches of the suite without a sanitizer (once per log directory), then
# choose the tests that cover every launched instance.
if [ "$cover" = 1 ]; then
    record="$log_dir/native.jsonl"
    if [ -s "$record" ]; then
        echo "cover: reusing the launch record $record"
    else
        echo "=== cover: recording the launches of the suite without a sanitizer"
        rm -f "$record.partial"
        workers=()  # the recording run in parallel workers when pytest-xdist is there
        "$PYTHON" -c "import xdist" 2> /dev/null && workers=(-n auto)
        GPUKERNELS_LAUNCH_RECORD="$record.partial" "$PYTHON" -m pytest -q -p no:cacheprovider \
            ${workers[@]+"${workers[@]}"} -m "$marker" ${pytest_args[@]+"${pytest_args[@]}"} \
            > "$log_dir/native.log" 2>&1
        status=$?
        echo "cover: $(pytest_summary "$log_dir/native.log")"
        if [ "$status" != 0 ]; then
            echo "cover: the suite failed without a sanitizer (exit $status); see $log_dir/native.log" >&2
            exit 1
        fi
        if [ ! -s "$record.partial" ]; then
            echo "cover: the run wrote no launch record (only tests under tests/ are recorded)" >&2
            exit 1
        fi
        mv "$record.partial" "$record"
    fi
    "$PYTHON" scripts/launch_cover.py choose "$record" --out "$log_dir/cover.txt" || exit 1
fi

declare -A seconds_of summary_of errors_of verdict_of
failed=0
for tool in "${tools[@]}"; do
    options=(--tool "$tool" --error-exitcode 86 --target-processes all --report-api-errors no)
    environment=()
    selection=()
    case "$tool" in
        memcheck) options+=(--padding 512); environment=(GPUKERNELS_NO_POOL=1) ;;
        initcheck) environment=(GPUKERNELS_NO_POOL=1) ;;
        racecheck|synccheck)
            if [ "$all_tests" = 0 ] && [ "$user_k" = 0 ] && [ "$cover" = 0 ]; then
                names=$(sync_rungs) || { echo "could not list the rungs (is there a GPU?)" >&2; exit 2; }
                if [ -z "$names" ]; then
                    echo "$tool: no rung uses shared memory or barriers; nothing to check" >&2
                    verdict_of[$tool]="FAILED (no rungs selected)"; failed=1; continue
                fi
                expression=$(sed 's/ / or /g' <<< "$names")
                selection=(-k "$expression")
                echo "$tool: the tests of rungs $names"
            fi ;;
    esac
    if [ "$cover" = 1 ]; then
        rm -f "$log_dir/$tool.jsonl"  # the record is appended to
        environment+=(GPUKERNELS_SELECT="$log_dir/cover.txt"
                      GPUKERNELS_LAUNCH_RECORD="$log_dir/$tool.jsonl")
    fi
    log="$log_dir/$tool.log"
    command=("$sanitizer" "${options[@]}" "$PYTHON" -m pytest -q -p no:cacheprovider -m "$marker"
             ${selection[@]+"${selection[@]}"} ${pytest_args[@]+"${pytest_args[@]}"})
    echo "=== $tool: $(printf '%q ' ${environment[@]+"${environment[@]}"} "${command[@]}")"
    start=$(date +%s.%N)
    env ${environment[@]+"${environment[@]}"} "${command[@]}" 2>&1 | tee "$log"
    status=${PIPESTATUS[0]}
    seconds=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.0f", b - a }')
    summary=$(pytest_summary "$log")
    errors=$(sanitizer_errors "$log")
    passed=$(count passed "$summary")
    problems=()
    [ "$status" = 0 ] || problems+=("exit status $status")
    [ "$errors" = 0 ] || problems+=("sanitizer errors: $errors")
    [ -n "$summary" ] || problems+=("no pytest summary line")
    [ "$passed" -gt 0 ] || problems+=("no test passed")
    [ "$(count failed "$summary")" = 0 ] || problems+=("failed tests")
    [ "$(count error "$summary")" = 0 ] || problems+=("test errors")  # "1 error", "2 errors"
    if [ "$cover" = 1 ]; then
        "$PYTHON" scripts/launch_cover.py check "$record" "$log_dir/$tool.jsonl" \
            > "$log_dir/$tool.cover" 2>&1 || problems+=("kernel instances not launched")
        head -n 20 "$log_dir/$tool.cover"
        cat "$log_dir/$tool.cover" >> "$log"
    fi
    seconds_of[$tool]=$seconds
    summary_of[$tool]=${summary:-none}
    errors_of[$tool]=$errors
    if [ ${#problems[@]} -eq 0 ]; then
        verdict_of[$tool]=ok
    else
        joined=$(printf '%s; ' "${problems[@]}")
        verdict_of[$tool]="FAILED (${joined%; })"
        failed=1
    fi
    echo "=== $tool: ${verdict_of[$tool]} in ${seconds}s; pytest: ${summary:-none}; sanitizer errors: $errors"
done

echo
printf '%-10s %8s  %-16s %-40s %s\n' tool seconds "sanitizer errors" "pytest" verdict
for tool in "${tools[@]}"; do
    printf '%-10s %8s  %-16s %-40s %s\n' "$tool" "${seconds_of[$tool]:--}" "${errors_of[$tool]:--}" \
        "${summary_of[$tool]:--}" "${verdict_of[$tool]}"
done
echo "full logs: $log_dir/<tool>.log"
exit "$failed"
