"""``python -m rdpgan.train dataset=adult epsilon=8``: train, sample, and write the run directory.

Outputs (each written atomically): ``synthetic.csv``, ``test.csv`` (held-out real rows),
``model.pt`` + ``model.json``, ``privacy.json`` (the ledger), ``metrics.json``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import hydra
from omegaconf import DictConfig

from rdpgan.cli import guarded, precheck_overrides, remove_if_only_hydra, run_dir, to_typed
from rdpgan.config import RunConfig, register_configs
from rdpgan.data.datasets import load_split
from rdpgan.errors import UserInputError
from rdpgan.io import atomic_write, write_json
from rdpgan.privacy.ledger import validate_budget
from rdpgan.synthesizer import DPCGAN

register_configs()


def run(cfg: RunConfig, out: Path) -> DPCGAN:
    """The whole job; every check that can fail on bad input runs before any output."""
    if cfg.privacy.accountant != "none":
        validate_budget(cfg.epsilon, cfg.delta)
    if cfg.sample.n is not None and cfg.sample.n <= 0:
        raise UserInputError(f"sample.n must be a positive integer, got {cfg.sample.n}")
    table, train_rows, test_rows = load_split(cfg.dataset, cfg.data.root)
    model = DPCGAN(
        epsilon=cfg.epsilon,
        delta=cfg.delta,
        privacy=cfg.privacy,
        model=cfg.model,
        train=cfg.train,
        seed=cfg.seed,
        device=cfg.device,
    ).fit(train_rows, table.target, table.schema, table.positive_label)
    synthetic = model.sample(cfg.sample.n)

    try:
        out.mkdir(parents=True, exist_ok=True)
        atomic_write(out / "test.csv", lambda tmp: test_rows.to_csv(tmp, index=False))
        model.save(out)
        write_json(out / "metrics.json", model.metrics)
        atomic_write(out / "synthetic.csv", lambda tmp: synthetic.to_csv(tmp, index=False))
    except OSError as exc:
        raise UserInputError(f"cannot write outputs to {out}: {exc.strerror or exc}") from exc
    ledger = model.ledger
    assert ledger is not None
    spent = ledger.to_dict()["epsilon_spent"]
    print(
        f"wrote {len(synthetic)} synthetic rows to {out / 'synthetic.csv'}; "
        f"epsilon spent {'n/a (NOT PRIVATE)' if spent is None else f'{spent:.4f}'} "
        f"of {cfg.epsilon} at delta={cfg.delta}"
    )
    return model


@hydra.main(config_path="../configs", config_name="config", version_base="1.3")
def _hydra_main(cfg: DictConfig) -> None:
    out = run_dir()
    guarded(lambda: run(to_typed(cfg, RunConfig), out), cleanup=lambda: remove_if_only_hydra(out))


def main() -> None:
    precheck_overrides("config", sys.argv[1:])
    _hydra_main()


if __name__ == "__main__":
    main()
