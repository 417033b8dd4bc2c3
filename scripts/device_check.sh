#!/usr/bin/env bash
# A prepared device check: the harness on a real accelerator (cuda or npu), in one command.
#   bash scripts/device_check.sh [DEVICE] [OUTDIR]
# DEVICE defaults to cuda; OUTDIR (default device-check/) receives the records, the report and a log.
# Every step runs under its own time limit and the records found so far are packed into OUTDIR after each
# step, so a run cut short still brings back what it measured. References are computed on this host's CPU.
# The wheels of the packages the host lacks come from `make wheelhouse` (.whl/); they are installed into
# /tmp/site when .whl/ exists. QUICK=1 runs only the host facts and the acceptance suite (a dry check on CPU);
# CACHE=dir hands the acceptance suite a reference cache computed beforehand on another host.
set -u
DEVICE=${1:-cuda}
OUTDIR=${2:-device-check}
WORK=${DEVICE_CHECK_WORK:-/tmp/ascendbench-device-check}
PY=${PYTHON:-python3}
mkdir -p "$OUTDIR" "$WORK"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 ASCENDBENCH_CACHE="$WORK/cache"
if [ -d .whl ]; then
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || { echo "wheel install failed"; exit 2; }
  export PYTHONPATH=/tmp/site:$PWD
fi
LOG="$OUTDIR/device_check.log"
: >"$LOG"
FAILED=0

snap() {  # pack every record, summary and report found so far (no tensors, no pictures)
  (cd "$WORK" && find . \( -name record.json -o -name 'summary.*' -o -name '*.log' -o -path './report/*' \) \
      -not -name '*.png' -print0 | tar --null -czf - -T - ) >"$OUTDIR/records.tgz" 2>/dev/null
}

step() {  # step NAME LIMIT_S COMMAND...: run, time, log; never stops the script
  local name=$1 limit=$2; shift 2
  local t0=$SECONDS
  echo "=== $name (limit ${limit}s): $*" | tee -a "$LOG"
  timeout --signal=INT "$limit" "$@" 2>&1 | tee -a "$LOG"
  local rc=${PIPESTATUS[0]}
  echo "=== $name: exit $rc in $((SECONDS - t0)) s" | tee -a "$LOG"
  [ "$rc" -eq 0 ] || FAILED=$((FAILED + 1))
  snap
}

AB=("$PY" -m ascendbench)
BUDGET=(bench.max_time_s=10 bench.min_time_s=2)
step host 20 bash -c "nvidia-smi || npu-smi info; $PY -c 'import torch, diffusers, hydra; print(torch.__version__, diffusers.__version__, hydra.__version__)'"
step acceptance 420 "$PY" -m ascendbench.acceptance device="$DEVICE" out="$WORK/acceptance" ${CACHE:+cache=$CACHE}
cp "$WORK/acceptance/acceptance.md" "$WORK/acceptance/acceptance.json" "$OUTDIR/" 2>/dev/null
if [ -z "${QUICK:-}" ]; then
step fidelity 45 "$PY" benchmarks/bench_harness_fidelity.py
step overhead 45 "$PY" benchmarks/bench_harness_overhead.py
step flux2-1024-float64 200 "${AB[@]}" -m model=flux2_small_decoder device="$DEVICE" dtype=float32,bfloat16 \
  preset=quality profile.enabled=true "${BUDGET[@]}" hydra.sweep.dir="$WORK/flux2_1024_f64"
step ltx-vae-mini 90 "${AB[@]}" -m model=ltx_video_vae device="$DEVICE" dtype=float32,bfloat16 preset=mini \
  "${BUDGET[@]}" hydra.sweep.dir="$WORK/ltx_vae"
fi
step report 30 "$PY" -m ascendbench.report "$WORK" --out "$WORK/report"
echo "device check: $FAILED step(s) failed" | tee -a "$LOG"
exit $(( FAILED > 0 ))
