"""``python -m rdpgan.train dataset=adult epsilon=8``: train, sample, and write the run directory.

Outputs (each written atomically): ``synthetic.csv``, ``test.csv`` (held-out real rows),
``model.npz`` + ``model.json``, ``privacy.json`` (the ledger), ``metrics.json``, ``run.json``
(the settings), ``schema.yaml`` (the schema, in the format ``schema.file=`` reads), and the
``checkpoint.*`` that ``resume=true`` continues from. A run that fails after it has spent
privacy keeps its ledger and what it paid for (``SPENDING_RECORD``); everything else it wrote
is removed.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pandas as pd
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from rdpgan import checkpoint, distributed, selfcheck
from rdpgan.cli import (
    existing_files,
    exit_finished,
    fail,
    guarded,
    hydra_entry,
    job_name,
    left_to_hydra,
    made_by_this_command,
    precheck_overrides,
    read_run_config,
    remove_new_files,
    run_dir,
    run_hydra_job,
    to_typed,
    write_run_config,
)
from rdpgan.config import RunConfig, register_configs
from rdpgan.data.split import check_test_size
from rdpgan.errors import UserInputError
from rdpgan.io import atomic_write, write_json
from rdpgan.models import resolve_device
from rdpgan.privacy.budget import LEDGER_FILE
from rdpgan.privacy.ledger import Release
from rdpgan.privacy.private_schema import SchemaRelease
from rdpgan.runs import (
    RELEASED_SCHEMA,
    SPENDING_RECORD,
    load_run_tables,
    record_schema,
    release_run_tables,
    require_held_out,
)
from rdpgan.sampler import spare_workers
from rdpgan.synthesizer import DPCGAN
from rdpgan.threads import apply_thread_policy
from rdpgan.training import TrainingInterrupted

register_configs()

WARNING_FILE = "PRIVACY_WARNING.txt"
_STOPPED_EARLY = (
    "{out} holds the ledger of a run that stopped before its first checkpoint (what it "
    "released is spent; see privacy.json); nothing to resume: choose another hydra.run.dir"
)


def run(cfg: RunConfig, out: Path) -> DPCGAN:
    """The whole job. Every check of the settings, and of the data that does not need a
    release, runs before any output; a failure after privacy is spent keeps its ledger."""
    apply_thread_policy(cfg.train.threads)
    release_undeclared_schema(cfg)
    distributed.start(resolve_device(cfg.device))
    lead = distributed.rank() == 0  # under torchrun only rank 0 writes anything
    if distributed.world_size() > 1:
        refuse_under_torchrun(cfg)
    if cfg.resume:
        model, test_rows, held_out = resume(cfg, out)
        return finish(model, test_rows, cfg, out, held_out)
    if lead:  # (the others would see what rank 0 has begun to write)
        refuse_used_directory(out)
    check_sample_size(cfg.sample.n)
    check_test_size(cfg.dataset.test_size)
    if cfg.evaluate:
        require_held_out(cfg, "evaluate=true")
    model = new_model(cfg)  # first: its checks of the settings come before any release
    train_rows, test_rows, schema = release_run_tables(cfg, schema_payment(model, cfg, out))

    def record_run() -> None:
        write_run_config(out, cfg)
        record_schema(out, cfg, schema, model.ledger)  # a private one's cost: on record (pay)

    if lead:
        writing(out, record_run)
    if (cfg.schema.source != "declared" or schema.reused) and lead:
        kind = {"private": "released", "declared": "reused released"}.get(
            cfg.schema.source, "inferred (NOT private)"
        )
        print(f"{kind} schema: {schema.summary(cfg.epsilon)}; see {out / RELEASED_SCHEMA}")
    positive = cfg.dataset.positive_label if schema.positive is None else schema.positive
    model.fit(train_rows, cfg.dataset.target, schema, positive, out if lead else None)
    return finish(model, test_rows, cfg, out, cfg.dataset.test_size > 0) if lead else model


def release_undeclared_schema(cfg: RunConfig) -> None:
    """A table whose schema nobody declared (``dataset=csv`` without ``schema.file``) gets a
    private one, released with DP and paid from its budget: the one safe choice that needs
    nothing from the user (``schema=unsafe_infer`` stays explicit). Recorded so in run.json."""
    schema = cfg.schema
    if schema.source == "declared" and schema.file is None and not cfg.dataset.columns:
        schema.source = "private"


def new_model(cfg: RunConfig) -> DPCGAN:
    """The run's model, unfitted: its checks of the settings come before any release."""
    return DPCGAN(
        epsilon=cfg.epsilon,
        delta=cfg.delta,
        privacy=cfg.privacy,
        model=cfg.model,
        train=cfg.train,
        seed=cfg.seed,
        device=cfg.device,
    )


def schema_payment(model: DPCGAN, cfg: RunConfig, out: Path) -> Callable[[list[Release]], None]:
    """What a private schema's release calls with its cost before its noise: the run's
    settings and its ledger, opened with that cost, go on disk first."""

    def pay(costs: list[Release]) -> None:
        def record_spending() -> None:
            write_run_config(out, cfg)
            model.charge_schema(SchemaRelease.cost(costs), out)

        writing(out, record_spending)

    return pay


def refuse_under_torchrun(cfg: RunConfig) -> None:
    """What data-parallel training does not do yet, refused before anything is spent."""
    if cfg.resume:
        raise UserInputError("resume=true runs in one process: start it without torchrun")
    if cfg.schema.source == "private":
        raise UserInputError(
            "schema=private is released in one process: release it first with python -m "
            "rdpgan.schema, then train with schema.file=<that run>/schema.yaml under torchrun"
        )


def resume(cfg: RunConfig, out: Path) -> tuple[DPCGAN, pd.DataFrame, bool]:
    """Continue the run in ``out`` with the settings it was started with: (model, held-out
    rows, whether the run holds rows out). Its file gets the rows the run asked for, unless
    this command names ``sample.n`` (set on ``cfg``, which the run finishes with)."""
    saved = read_run_config(out)
    if cfg.sample.n is None:
        cfg.sample.n = saved.sample.n
    check_sample_size(cfg.sample.n)  # the command's, or the one run.json recorded
    if cfg.evaluate:
        require_held_out(saved, "evaluate=true")
    if (out / "synthetic.csv").is_file():
        raise UserInputError(f"the run in {out} has finished; it will not train further")
    if stopped_before_training(out):
        raise UserInputError(_STOPPED_EARLY.format(out=out))
    saved.data.root = cfg.data.root or saved.data.root
    # The run's own rows, read with its own schema: refused if schema.yaml was edited since.
    trained = DPCGAN.checkpoint_schema(out)
    train_rows, test_rows, _ = load_run_tables(saved, out, expected=trained)
    # noise_seed is never saved with a run: only this command's own can key the noise.
    model = DPCGAN.resume(out, train_rows, device=cfg.device, noise_seed=cfg.privacy.noise_seed)
    return model, test_rows, saved.dataset.test_size > 0


def spending_record(path: Path) -> bool:
    """Files a failed run keeps: its spending record, where a ledger is on disk."""
    return path.name in SPENDING_RECORD and (path.parent / LEDGER_FILE).is_file()


def stopped_before_training(out: Path) -> bool:
    """A ledger, and neither a checkpoint nor outputs: the run failed or was killed after a
    release but before its first checkpoint."""
    later = (checkpoint.META, *checkpoint.SLOTS, "synthetic.csv", "model.json")
    return (out / LEDGER_FILE).is_file() and not any((out / name).exists() for name in later)


def refuse_used_directory(out: Path) -> None:
    """A fresh run never overwrites another run's ledger (its budget may be spent)."""
    if stopped_before_training(out):
        raise UserInputError(_STOPPED_EARLY.format(out=out))
    for name in (LEDGER_FILE, checkpoint.META, RELEASED_SCHEMA):
        if (out / name).is_file():
            raise UserInputError(
                f"{out} already holds a run ({name}); continue it with resume=true or choose "
                "another hydra.run.dir"
            )


def check_sample_size(n: int | None) -> None:
    if n is not None and n <= 0:
        raise UserInputError(f"sample.n must be a positive integer, got {n}")


def writing(out: Path, write: Callable[[], None]) -> None:
    try:
        out.mkdir(parents=True, exist_ok=True)
        write()
    except OSError as exc:
        raise UserInputError(f"cannot write outputs to {out}: {exc.strerror or exc}") from exc


def finish(
    model: DPCGAN, test_rows: pd.DataFrame, cfg: RunConfig, out: Path, held_out: bool
) -> DPCGAN:
    """Sample and write the outputs (``synthetic.csv`` last: its presence means 'done', so a
    run killed before it resumes to write them all, the privacy warning included), and the
    held-out rows as ``test.csv`` when the run holds any out."""
    # (Nothing else runs now: every core samples.)
    parts = model.sampler.parts(cfg.sample.n, None, None, spare_workers())
    assert model.ledger is not None and model.transformer is not None
    synthetic = model.transformer.decode_parts(*parts)
    gaps = model.release_gaps(parts[1], parts[2])  # free: released values and rows
    model.metrics["self_check"] = [gap.to_dict() for gap in gaps]

    def write_all() -> None:
        assert model.transformer is not None and model.ledger is not None
        if not model.ledger.end_to_end:  # beside the outputs
            text = "".join(f"{note}\n" for note in model.ledger.notes)
            atomic_write(out / WARNING_FILE, lambda tmp: tmp.write_text(text))
        if held_out:  # (dataset.test_size=0: no sensitive file the user did not ask for)
            held = model.transformer.schema.written(test_rows)  # dates as dates, tokens
            atomic_write(out / "test.csv", lambda tmp: held.to_csv(tmp, index=False))
        model.save(out)
        write_json(out / "metrics.json", model.metrics)
        written = model.transformer.schema.written(synthetic)
        atomic_write(out / "synthetic.csv", lambda tmp: written.to_csv(tmp, index=False))

    writing(out, write_all)
    if not model.ledger.end_to_end:
        for note in model.ledger.notes:
            print(f"WARNING: {note}", file=sys.stderr)
    loud = selfcheck.loud_line(gaps)
    if loud is not None:
        print(loud, file=sys.stderr)
    spent = model.ledger.to_dict()["epsilon_spent"]
    print(
        f"wrote {len(synthetic)} synthetic rows to {out / 'synthetic.csv'}; "
        f"epsilon spent {'n/a (NOT PRIVATE)' if spent is None else f'{spent:.4f}'} "
        f"of {model.epsilon} at delta={model.delta}"
    )
    if cfg.evaluate:
        from rdpgan.evaluate import evaluate_run  # the classifiers load only when asked for

        scores = evaluate_run(out, seed=0, real=True)
        print(f"mean AUROC {scores['mean']:.4f} (real data {scores['real']['mean']:.4f})")
    return model


_SEED_IN_SWEEP = (
    "privacy.noise_seed cannot be given to a --multirun sweep: Hydra writes a sweep's config "
    "into multirun.yaml; run each seeded job on its own, or leave the seed out"
)


def train_job(cfg: DictConfig) -> None:
    """The training job, in the run directory Hydra has made (:func:`start`)."""
    out = run_dir()
    before = existing_files(out)
    refuse_seed_in_sweep(cfg, out, before)
    try:
        guarded(  # rank > 0 wrote nothing, and must not remove what rank 0 writes
            lambda: run(to_typed(cfg, RunConfig), out),
            cleanup=(
                (lambda: remove_new_files(out, before, keep=spending_record))
                if distributed.rank() == 0
                else None
            ),
        )
        if distributed.rank() > 0 and made_by_this_command(out) and not any(out.iterdir()):
            out.rmdir()  # Hydra made it for this rank (its clock may name another directory)
    except TrainingInterrupted as stop:
        print(
            f"stopped: {stop}; checkpoint and ledger are in {out}; continue with "
            f"`python -m rdpgan.train resume=true hydra.run.dir={out}`",
            file=sys.stderr,
        )
        sys.exit(130)
    finally:
        distributed.stop()


def refuse_seed_in_sweep(cfg: DictConfig, out: Path, before: set[Path]) -> None:
    """A noise seed set in a config file, so past the command-line check: a sweep has already
    written it into multirun.yaml, which this command made; remove that and this job's files."""
    if HydraConfig.get().mode == RunMode.MULTIRUN and cfg.privacy.noise_seed is not None:
        (Path(HydraConfig.get().sweep.dir) / "multirun.yaml").unlink(missing_ok=True)
        remove_new_files(out, before)
        fail(f"{_SEED_IN_SWEEP} (its multirun.yaml was deleted)")


def refuse_recorded_noise_seed(args: list[str]) -> None:
    """A sweep writes its config and overrides into ``multirun.yaml`` (and may name run
    directories after them): a noise seed there would be on disk, while the guarantee of a
    seeded run rests on its secrecy. Caught here before Hydra starts when it is on the command
    line; set in a config file, the job itself refuses (see ``train_job``)."""
    sweeping = any(
        arg in ("-m", "--multirun") or arg.lstrip("+").lower() == "hydra.mode=multirun"
        for arg in args
    )
    seeds = [a.split("=", 1)[1] for a in args if a.lstrip("+~").startswith("privacy.noise_seed=")]
    if sweeping and any(seed.strip().lower() not in ("null", "none", "") for seed in seeds):
        fail(_SEED_IN_SWEEP)


def start(job: Callable[[DictConfig], None]) -> None:
    """A command over the run config (train, schema): its checks before Hydra starts, then
    ``job`` as Hydra's job (named after its module, as ``@hydra.main`` names it)."""
    args = sys.argv[1:]
    refuse_recorded_noise_seed(args)
    name = job_name(job)
    composed = precheck_overrides("config", args, record_dirs=True, job_name=name)  # before
    if composed is None or left_to_hydra(composed):  # Hydra makes any directory
        hydra_entry(job, "config")()
    else:
        run_hydra_job(composed, job)
    exit_finished()


def main() -> None:
    start(train_job)


if __name__ == "__main__":
    main()
