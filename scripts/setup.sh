#!/usr/bin/env bash
# One-time (and idempotent) set-up: the right PyTorch build, then rdpgan with its test tools.
#
# PyTorch: a machine with an NVIDIA GPU gets the default (CUDA) build; a machine without one gets
# the CPU build, which is a fraction of the size. A torch that is already installed is kept.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python}"
TORCH_VERSION="${RDPGAN_TORCH_VERSION:-2.13.0}"
pip_install() { "$PY" -m pip install --quiet --disable-pip-version-check "$@"; }

if ! "$PY" -c "import torch" >/dev/null 2>&1; then
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    echo "setup: GPU found, installing the CUDA build of torch" >&2
    pip_install "torch==${TORCH_VERSION}"
  else
    echo "setup: no GPU, installing the CPU build of torch" >&2
    # A local wheel (find-links) or an index that carries the +cpu build wins; otherwise
    # PyTorch's own CPU index.
    pip_install "torch==${TORCH_VERSION}+cpu" 2>/dev/null \
      || pip_install "torch==${TORCH_VERSION}" --index-url https://download.pytorch.org/whl/cpu
  fi
fi
# Skip the resolver when this exact tree is already installed (keeps CI and re-runs fast).
stamp=".setup-stamp"
digest=$(cat pyproject.toml | sha256sum | cut -c1-16)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$digest" ] || ! "$PY" -c "import rdpgan, opacus, hydra, xgboost, pytest" >/dev/null 2>&1; then
  pip_install -e ".[dev]"
  echo "$digest" > "$stamp"
fi
# The real data sets live beside the checkout (../shared/data) unless the user says otherwise.
if [ -z "${RDPGAN_DATA_DIR:-}" ] && [ ! -d data/adult ] && [ -d ../shared/data ]; then
  echo "setup: using ../shared/data (set RDPGAN_DATA_DIR to change)" >&2
fi
