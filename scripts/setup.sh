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
# Looks modules up without importing them (importing torch alone takes seconds).
have() { "$PY" -c "import importlib.util as u, sys; sys.exit(any(u.find_spec(m) is None for m in sys.argv[1:]))" "$@"; }
# True when `import rdpgan` from outside the tree finds THIS checkout (not another clone's
# editable install, which a stale stamp would otherwise hide).
installed_here() {
  (cd / && "$PY" -c "import importlib.util as u, sys; s = u.find_spec('rdpgan'); sys.exit(s is None or not s.origin.startswith(sys.argv[1]))" "$OLDPWD/rdpgan/")
}

if ! have torch; then
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
digest=$(sha256sum pyproject.toml | cut -c1-16)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$digest" ] || ! installed_here || ! have opacus hydra xgboost sklearn pytest xdist dp_accounting numba; then
  pip_install -e ".[dev]"
  echo "$digest" > "$stamp"
fi
# Sampling's kernels compiled once, here, into numba's cache beside rdpgan/kernels.py (for this
# CPU), rather than by the first sampling command (seconds; a cached one loads them).
"$PY" -c "from rdpgan import kernels; kernels.compile_for_sampling()"
