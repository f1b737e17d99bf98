#!/usr/bin/env bash
# One prepared pass over explorer's CUDA path, for a machine with an NVIDIA GPU (run from the repo root).
# Writes its figures under ${OUT:-/tmp/gpu_check}. Each step has its own time limit so one slow step cannot
# starve the rest. Optional: wheels in .whl/ (Optuna and its needs) are installed into /tmp/site first.
set -uo pipefail
OUT=${OUT:-/tmp/gpu_check}; mkdir -p "$OUT"
DEV=${DEV:-cuda}      # DEV=cpu runs the same steps on the CPU (to check the script itself)
QUICK=${QUICK:-0}    # QUICK=1 shrinks every step (for that check)
export PYTHONUNBUFFERED=1 EXPLORER_CACHE_DIR=/tmp/explorer-cache PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH="$PWD:/tmp/site"
fi
# step LIMIT CMD...: run CMD under a time limit; its banner goes to stderr so redirected output stays clean.
step() { local limit=$1; shift; echo "=== $* (limit ${limit}s)" >&2; local t0=$SECONDS; timeout "$limit" "$@"; echo "=== rc=$? in $((SECONDS - t0))s" >&2; }
ex=(python3 -m explorer.cli)

nvidia-smi -L; python3 -c 'import torch, optuna; print("torch", torch.__version__, "cuda", torch.cuda.is_available(), "optuna", optuna.__version__)'
step 120 python3 -m pytest -q -x -m cuda tests/ -p no:cacheprovider
step 90 "${ex[@]}" train --task digits --device "$DEV" --epochs $([ "$QUICK" = 1 ] && echo 1 || echo 15) --json > "$OUT/train_cuda.json"; cat "$OUT/train_cuda.json" | head -40
step 60 "${ex[@]}" bench attention --device "$DEV" --min-run-time $([ "$QUICK" = 1 ] && echo 0.05 || echo 0.5) --json --out "$OUT/bench" > "$OUT/bench_vits.json"
step 60 "${ex[@]}" bench attention --device "$DEV" --batch 64 --min-run-time $([ "$QUICK" = 1 ] && echo 0.05 || echo 0.5) --json > "$OUT/bench_b64.json"
python3 - "$OUT" <<'PY'
import json, sys
for name in ("bench_vits", "bench_b64"):
    d = json.load(open(f"{sys.argv[1]}/{name}.json"))
    print(name, d["shape"])
    for r in d["rows"]:
        print(f"  {r['impl']:<10} {r['median_ms']:8.4f} ms  x{r['speedup_vs_serial']:.2f}  {r['peak_mem_mb']:8.2f} MB  "
              f"{r['gflops']:9.1f} GFLOP/s ({r['pct_of_peak']:.1f}% of matmul peak)")
PY
# A small study on the GPU with two workers sharing it, then its report.
step 150 "${ex[@]}" study run studies/quickstart.toml --storage sqlite:////tmp/gpu_qs.db --device "$DEV" --n-trials $([ "$QUICK" = 1 ] && echo 2 || echo 16) --workers 2
step 60 "${ex[@]}" report quickstart --storage sqlite:////tmp/gpu_qs.db --out /tmp/gpu_report && cp /tmp/gpu_report/report.md "$OUT/quickstart_cuda_report.md"
# "One head learns one relation": relations with k=4, 1 vs 4 heads per layer (d_model 64, 2 layers), 120 epochs
# (the CPU record in benchmarks/relations_heads.md: 0.530 vs 0.999, all 4 relations followed by the 4-head model).
step 300 python3 -m benchmarks.relations_heads 4 1,4 $([ "$QUICK" = 1 ] && echo 1 || echo 120) --device "$DEV" > "$OUT/relations.txt"
cat "$OUT/relations.txt"
