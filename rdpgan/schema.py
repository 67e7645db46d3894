"""``python -m rdpgan.schema dataset=csv dataset.path=my.csv dataset.target=y epsilon=8``:
release a private schema on its own, with what it cost.

Writes ``schema.yaml`` (the schema, its cost and a fingerprint), ``privacy.json`` (a ledger of
the schema's releases) and ``run.json`` into the run directory. A training run that declares
it unedited (``schema.file=<dir>/schema.yaml``) composes that cost into its own ledger, under
torchrun too, where a schema cannot be released: give it the same ``epsilon``, the total of both.
Whatever ``schema=`` says, this command releases a private schema.
"""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig

from rdpgan import distributed
from rdpgan.cli import (
    existing_files,
    guarded,
    remove_new_files,
    run_dir,
    to_typed,
)
from rdpgan.config import RunConfig, register_configs
from rdpgan.errors import UserInputError
from rdpgan.runs import RELEASED_SCHEMA, record_schema, release_run_tables
from rdpgan.train import (
    new_model,
    refuse_seed_in_sweep,
    refuse_used_directory,
    schema_payment,
    spending_record,
    start,
    writing,
)

register_configs()


def run(cfg: RunConfig, out: Path) -> None:
    if distributed.world_size() > 1:  # each process would draw a schema of its own
        raise UserInputError(
            "python -m rdpgan.schema runs in one process: start it without torchrun"
        )
    cfg.schema.source = "private"
    refuse_used_directory(out)
    model = new_model(cfg)
    _, _, release = release_run_tables(cfg, schema_payment(model, cfg, out))
    writing(out, lambda: record_schema(out, cfg, release, model.ledger))
    print(
        f"released schema: {release.summary(cfg.epsilon)}; wrote {out / RELEASED_SCHEMA}; "
        f"train with schema.file={out / RELEASED_SCHEMA} epsilon={cfg.epsilon:g} (its cost "
        "comes along)"
    )


def schema_job(cfg: DictConfig) -> None:
    """The schema job, in the run directory Hydra has made (:func:`rdpgan.train.start`)."""
    out = run_dir()
    before = existing_files(out)
    refuse_seed_in_sweep(cfg, out, before)
    guarded(
        lambda: run(to_typed(cfg, RunConfig), out),
        cleanup=lambda: remove_new_files(out, before, keep=spending_record),
    )


def main() -> None:
    start(schema_job)


if __name__ == "__main__":
    main()
