#!/usr/bin/env bash
# The prepared GPU check (issue #21, part 3): one short run, under 8 minutes on a fresh
# GPU machine, install included. When JAX sees no GPU it installs requirements.txt and
# requirements-gpu.txt (the CUDA plugin of the tested jax, constraints.txt), then bench/gpu_check.py
# runs every item through the app's worker and prints the table: item, PASS/FAIL/SKIP,
# seconds. A machine whose JAX already sees a GPU keeps its own jax (the table's first
# row names the version). Without nvidia-smi it runs the dry mode and exits 0.
#
#   bash bench/gpu_check.sh                 # the GPU run, or the dry mode without a GPU
#   bash bench/gpu_check.sh --dry           # what a GPU run checks
#   bash bench/gpu_check.sh --device cpu    # every item on the CPU (verifies the check)
#   bash bench/gpu_check.sh --samples mlp,attention
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
TOTAL_S=480      # the whole run, install included
RESERVED_S=90    # the items besides the samples, and the margin

case " $* " in
*" --dry "* | *" --device "*) exec "$PY" bench/gpu_check.py "$@" ;;
esac
if ! command -v nvidia-smi >/dev/null; then
    exec "$PY" bench/gpu_check.py "$@"  # it finds no GPU: the dry mode
fi

start=$SECONDS
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
if "$PY" -c "import jax, sys; sys.exit(not jax.devices('gpu'))" 2>/dev/null; then
    status=SKIP
    detail="JAX already sees a GPU: $("$PY" -c 'import jax; print("jax", jax.__version__)')"
else
    # pip's own timeout keeps a stalled download from eating the whole run
    if timeout 300 "$PY" -m pip install -q -r requirements.txt -r requirements-gpu.txt -c constraints.txt; then
        status=PASS
        detail="$("$PY" -m pip freeze | grep -E '^jax(lib|-cuda12-plugin|-cuda12-pjrt)?==' | tr '\n' ' ')"
    else
        status=FAIL
        detail="pip install -r requirements-gpu.txt failed (exit $?): the check runs with what is there"
    fi
fi
install_s=$((SECONDS - start))
budget=$((TOTAL_S - install_s - RESERVED_S))
((budget < 60)) && budget=60

"$PY" bench/gpu_check.py --device gpu --budget "$budget" --install-s "$install_s" \
    --install-status "$status" --install-detail "$detail" "$@"
rc=$?
echo "gpu_check.sh: $((SECONDS - start)) s in all (the target is under $TOTAL_S s)"
exit $rc
