#!/usr/bin/env bash
# Every CUDA path of attnkit in one run on one GPU, with a short report: pass/fail per step.
#
#   bash benchmarks/cuda_check.sh            # from anywhere; it runs in the kit's root
#   PYTHON=path/to/python CUDA_CHECK_BUDGET=300 CUDA_CHECK_OUT=folder bash benchmarks/cuda_check.sh
#
# Steps (each under its own timeout, all together under CUDA_CHECK_BUDGET seconds, default 300;
# a step left without time is reported as not run):
#   class     the sample class: attnkit grade --devices cpu,meta,cuda --require cuda --seed 0, with the
#             CUDA start-up per submission and the peak RSS the summary prints, and the peak GPU memory
#             of each learner process (nvidia-smi sampled every 100 ms while it grades: CUDA context included)
#   public    the public tests on the GPU: pytest exercises --device cuda (the reference; conftest's --device)
#   audit     attnkit audit --devices cuda: the reference passes every case on cuda, every known mistake fails one
#   tests     the suite's CUDA tests: pytest -m cuda where that marker is registered, else pytest tests -k cuda
#   half      benchmarks/half_tolerances.py (float16/bfloat16 against float64, per exercise), where it exists
#   ray       the sample class with --executor ray (one GPU actor) where ray is importable and grade has
#             --executor; its grades.csv must equal the class step's
# Without a GPU (no nvidia-smi, none listed, or CUDA_VISIBLE_DEVICES hiding them all) it says so and
# exits 0 at once. Exit status: 0 when no step failed, 1 otherwise. Logs: CUDA_CHECK_OUT (default: a
# temporary folder, printed). A benchmark script, not a test.
set -u

no_gpu() {
    echo "cuda_check: no GPU here ($1): nothing to check. Run it on a machine with an NVIDIA GPU."
    exit 0
}
if [ "${CUDA_VISIBLE_DEVICES+set}" = set ] && { [ -z "$CUDA_VISIBLE_DEVICES" ] || [ "$CUDA_VISIBLE_DEVICES" = "-1" ]; }; then
    no_gpu "CUDA_VISIBLE_DEVICES='${CUDA_VISIBLE_DEVICES}' hides every GPU"
fi
command -v nvidia-smi >/dev/null 2>&1 || no_gpu "no nvidia-smi on PATH"
GPUS=$(nvidia-smi -L 2>/dev/null | grep '^GPU ' || true)
[ -n "$GPUS" ] || no_gpu "nvidia-smi lists no GPU"

cd "$(dirname "$0")/.." || exit 1
KIT=$(pwd)
if [ -n "${PYTHON:-}" ]; then PY=$PYTHON
elif [ -x "$KIT/.venv/bin/python" ]; then PY=$KIT/.venv/bin/python
else PY=$(command -v python3 || command -v python); fi
OUT=${CUDA_CHECK_OUT:-$(mktemp -d "${TMPDIR:-/tmp}/attnkit-cuda-check.XXXXXX")}
mkdir -p "$OUT"
BUDGET=${CUDA_CHECK_BUDGET:-300}
START=$SECONDS
REPORT=()
FAILED=0

TORCH=$("$PY" -c 'import torch; print(torch.__version__, "CUDA", torch.version.cuda, "available" if torch.cuda.is_available() else "NOT available")' 2>&1 | tail -1)
echo "cuda_check: $(echo "$GPUS" | head -1 | cut -c1-80); $(echo "$GPUS" | wc -l) GPU(s); torch $TORCH; logs in $OUT"
if [[ "$TORCH" == *" NOT available" || "$TORCH" != *" CUDA "*" available" ]]; then
    echo "FAIL  torch cannot use the GPU nvidia-smi lists (a CPU build of torch? $TORCH)"
    exit 1
fi

# step NAME LIMIT CMD...: run CMD under min(LIMIT, the budget left); its output in $OUT/NAME.log; sets RC and TOOK
step() {
    local name=$1 limit=$2
    shift 2
    local left=$((BUDGET - (SECONDS - START)))
    [ "$left" -lt "$limit" ] && limit=$left
    if [ "$limit" -lt 5 ]; then
        RC=125 TOOK=0
        return
    fi
    local began=$SECONDS
    timeout --kill-after=10 "$limit" "$@" >"$OUT/$name.log" 2>&1
    RC=$? TOOK=$((SECONDS - began))
    LIMIT=$limit
}

# record NAME DETAIL: one line of the report from RC (0 pass, 124/137 timed out, 125 not run, else fail)
record() {
    local name=$1 detail=$2 verdict
    case $RC in
        0) verdict=PASS ;;
        125) verdict=SKIP detail="not run: the ${BUDGET} s budget was spent" ;;
        124 | 137) verdict=FAIL detail="timed out after ${LIMIT} s; $detail" FAILED=1 ;;
        *) verdict=FAIL detail="exit $RC; $detail" FAILED=1 ;;
    esac
    REPORT+=("$(printf '%-5s %-7s %4ss  %s' "$verdict" "$name" "$TOOK" "$detail")")
}

skip() { REPORT+=("$(printf '%-5s %-7s %4ss  %s' SKIP "$1" 0 "$2")"); }
last_line() { grep -v '^\s*$' "$OUT/$1.log" 2>/dev/null | tail -1 | cut -c1-160; }
flat_log() { tr -s ' \n' ' ' <"$OUT/$1.log"; }

# --- class: the sample class on cpu, meta and cuda, with the GPU memory of each learner process ------------------
nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits -lms 100 >"$OUT/gpu-memory.csv" 2>/dev/null &
SAMPLER=$!
step class 150 "$PY" -m grader.cli grade examples/submissions --devices cpu,meta,cuda --require cuda --seed 0 --force \
    --out "$OUT/class"
kill "$SAMPLER" 2>/dev/null
wait "$SAMPLER" 2>/dev/null
GPU_MEM=$(awk -F', *' '$1 ~ /^[0-9]+$/ { if ($2 > peak[$1]) peak[$1] = $2 }
    END { n = 0; for (p in peak) { n++; if (peak[p] > top) top = peak[p] }
          if (n) printf "peak GPU memory of a learner process %d MiB (%d processes seen)", top, n;
          else printf "nvidia-smi listed no learner process (in a container without the host PID namespace?)" }' \
    "$OUT/gpu-memory.csv")
CLASS_INFO=$(flat_log class | grep -o 'CUDA start-up per submission: [0-9.]* s' | head -1)
RSS_INFO=$(flat_log class | grep -o 'peak RSS of a learner.s process: [0-9]* MiB' | head -1)
ISOLATION=$(flat_log class | grep -o 'isolation: [^;]*' | head -1)
if [ $RC -eq 0 ] && [ -f "$OUT/class/grades.csv" ]; then
    TOTALS=$(awk -F, 'NR > 1 { printf "%s%s %s", sep, $1, $(NF-1); sep = ", " }' "$OUT/class/grades.csv")
    record class "${CLASS_INFO:-no CUDA start-up reported}; ${RSS_INFO:-}; $GPU_MEM; $ISOLATION; totals: $TOTALS"
else
    [ $RC -eq 0 ] && RC=1
    record class "$(last_line class)"
fi

# --- public: the public tests on the GPU -------------------------------------------------------------------------
step public 60 "$PY" -m pytest exercises --device cuda -q -p no:cacheprovider -rs
SUMMARY=$(last_line public)
if [ $RC -eq 0 ] && grep -q 'SKIPPED.*cuda' "$OUT/public.log"; then  # a test skipped for want of cuda is no pass
    RC=1 SUMMARY="skipped for cuda: $(grep -m1 'SKIPPED.*cuda' "$OUT/public.log" | cut -c1-100); $SUMMARY"
fi
record public "$SUMMARY"

# --- audit: the hidden suite on cuda -----------------------------------------------------------------------------
step audit 90 "$PY" -m grader.cli audit --devices cuda --seed 0
AUDIT=$(flat_log audit | grep -oE '(The reference [^.:]*|[0-9]+ of [0-9]+ known mistakes killed|Survivors: [^.]*)' | tr '\n' ';')
record audit "${AUDIT:-$(last_line audit)}"

# --- tests: the suite's CUDA tests -------------------------------------------------------------------------------
# (this script's own tests, tests/test_cuda_check.py, are left out: they run this script)
if grep -qE '^\s*"cuda[:"]' pyproject.toml; then SELECT=(-m cuda); else SELECT=(-k "cuda and not cuda_check"); fi
step tests 120 "$PY" -m pytest tests "${SELECT[@]}" -q -p no:cacheprovider -rs
record tests "pytest ${SELECT[*]}: $(last_line tests)"

# --- half: float16/bfloat16 tolerances against float64 ------------------------------------------------------------
if [ -f benchmarks/half_tolerances.py ]; then
    HALF=(benchmarks/half_tolerances.py)
    "$PY" benchmarks/half_tolerances.py --help 2>/dev/null | grep -q -- '--device' && HALF+=(--device cuda)
    step half 60 "$PY" "${HALF[@]}"
    record half "$(last_line half)"
else
    skip half "benchmarks/half_tolerances.py is not in this kit: no half-precision tolerances measured"
fi

# --- ray: the sample class through Ray, one GPU actor --------------------------------------------------------------
if ! "$PY" -c 'import ray' >/dev/null 2>&1; then
    skip ray "ray is not importable here (pip install 'attnkit[ray]')"
elif ! "$PY" -m grader.cli grade --help 2>/dev/null | grep -q -- '--executor'; then
    skip ray "attnkit grade has no --executor option in this kit"
else
    step ray 150 "$PY" -m grader.cli grade examples/submissions --executor ray --devices cpu,meta,cuda --require cuda \
        --seed 0 --force --out "$OUT/ray"
    if [ $RC -eq 0 ] && ! cmp -s "$OUT/ray/grades.csv" "$OUT/class/grades.csv"; then
        RC=1
        record ray "grades.csv differs from the local executor's (diff $OUT/ray/grades.csv $OUT/class/grades.csv)"
    else
        record ray "$(flat_log ray | grep -oE '[^.;]*(executor|worker)[^.;]*' | head -1); grades.csv as the local one's"
    fi
fi

echo
echo "attnkit cuda_check report ($((SECONDS - START)) s of a ${BUDGET} s budget):"
printf '  %s\n' "${REPORT[@]}"
exit $FAILED
