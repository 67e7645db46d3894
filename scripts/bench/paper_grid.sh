#!/usr/bin/env bash
# The paper's grid at one commit (issue 28), written to results_dir (default results/grid):
# {adult, cervical, creditcard} x {cgan, dp_cgan, rdp_cgan} x epsilon {1, 2, 4, 6, 8}, 3
# repeats, then the marginal-based peers (aim, mst) at epsilon {1, 8}, 2 repeats, AIM's rounds
# capped at 48, then the report (into the README beside results_dir: results/README.md).
# Resumable: a finished cell is skipped.
#
#   bash scripts/bench/paper_grid.sh [results_dir] [gans|peers|report ...]
#
# Run it from a clean checkout of the commit the grid is to record (every row names it), alone
# on the machine: two jobs at once, one core each.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${1:-results/grid}"
shift || true
if [ $# -gt 0 ]; then PARTS=("$@"); else PARTS=(gans peers report); fi
LAUNCH=(hydra/launcher=joblib hydra.launcher.n_jobs=2)
TABLES=table=adult,cervical,creditcard

for part in "${PARTS[@]}"; do
  case "$part" in
    gans)
      # The non-private CGAN does not depend on epsilon: one job per table (two epsilon jobs
      # at once would both run it).
      python scripts/bench/benchmark.py -m "$TABLES" method=cgan epsilon=8 repeats=3 \
        results_dir="$OUT" "${LAUNCH[@]}"
      python scripts/bench/benchmark.py -m "$TABLES" method=dp_cgan,rdp_cgan epsilon=1,2,4,6,8 \
        repeats=3 results_dir="$OUT" "${LAUNCH[@]}"
      ;;
    peers)
      OMP_NUM_THREADS=1 XLA_FLAGS="--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1" \
        python scripts/bench/benchmark.py -m "$TABLES" method=mst,aim epsilon=1,8 repeats=2 \
        aim_rounds=48 results_dir="$OUT" "${LAUNCH[@]}"
      ;;
    report)
      python scripts/reports/report_benchmark.py --results "$OUT" --readme "$(dirname "$OUT")/README.md"
      ;;
    *)
      echo "paper_grid.sh: unknown part '$part' (gans, peers or report)" >&2
      exit 2
      ;;
  esac
done
