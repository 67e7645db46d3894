"""DPCGAN: a conditional GAN whose discriminator is trained with DP-SGD, in the scikit-learn
style: ``fit(df)``, ``sample(n)``, ``save(dir)``, ``DPCGAN.load(dir)``.

This module wires three others: :mod:`rdpgan.fitting` spends the budget (the releases, DP-SGD
and the pairs measured after training, all in one ledger), :mod:`rdpgan.sampler` draws rows
from the generator and the releases (post-processing, free), and :mod:`rdpgan.fitted` holds
what a fit leaves and writes and reads it.

Fitting's machinery (Opacus, the accountants, the mechanisms) is imported when a model is
fitted or resumed, not with this module: a saved model is loaded and sampled without it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from rdpgan.config import ColumnSpec
from rdpgan.data.schema import Schema
from rdpgan.fitted import FittedModel

if TYPE_CHECKING:
    import pandas as pd

    from rdpgan.privacy.private_schema import SchemaRelease

    SchemaLike = Schema | SchemaRelease | Sequence[ColumnSpec | dict] | str | Path


class DPCGAN(FittedModel):
    """Differentially private conditional GAN for one table, conditioned on a categorical
    column: its target, or one its released schema chooses."""

    def fit(
        self,
        df: pd.DataFrame,
        target: str | None = None,
        schema: SchemaLike | None = None,
        positive_label: Any = None,
        checkpoint_dir: str | Path | None = None,
    ) -> DPCGAN:
        """Train on ``df`` (the private rows); domains come from ``schema`` alone.

        Without ``schema``, one is released with DP from ``df``'s cells (paid from epsilon, in
        the ledger). A :class:`~rdpgan.privacy.private_schema.SchemaRelease`, or the path of a
        run's ``schema.yaml``, brings its cost and notes into this run's ledger, composed with
        everything else; a declared schema (Schema or column specs) is public and costs
        nothing. Without ``target``, the schema chooses the column to condition on: a released
        one, the categorical column with the most even released classes; a declared one, its
        first categorical column that is never missing.

        With ``checkpoint_dir``, the training state is saved every
        ``train.checkpoint_share`` of the planned steps (or ``train.checkpoint_every`` steps)
        so that :meth:`resume` can continue after a crash or Ctrl-C.
        """
        from rdpgan import fitting
        from rdpgan.privacy.private_schema import SchemaRelease

        if isinstance(schema, (str, Path)):  # a schema.yaml: with the cost it carries
            from rdpgan.data.schema_file import read_schema_release

            schema = read_schema_release(Path(schema))
        if schema is None:
            df, schema = fitting.release_frame_schema(
                self, df, target, positive_label, checkpoint_dir
            )
            target = target or schema.target
            positive_label = positive_label if schema.positive is None else schema.positive
        elif not isinstance(schema, SchemaRelease):
            schema = SchemaRelease(
                schema if isinstance(schema, Schema) else Schema.from_specs(schema)
            )
        if target is None:  # a declared schema's: chosen from it alone (public)
            target, positive_label = fitting.declared_target(schema, positive_label)
        fitting.fit(self, df, target, schema, positive_label, checkpoint_dir)
        return self

    @classmethod
    def resume(
        cls,
        directory: str | Path,
        df: pd.DataFrame,
        device: str = "auto",
        noise_seed: int | None = None,
    ) -> DPCGAN:
        """Continue a checkpointed run on the same private rows.

        Steps charged before the crash stay charged (the ledger file is written ahead of the
        steps it covers), so the resumed run can only spend what is left of the budget. A run
        that has finished or spent its budget takes no step: the generator of its last
        checkpoint (its moving average, with ``train.generator_ema``) is returned (sampling
        from it costs no privacy). ``noise_seed`` is never saved with a run: pass it again for
        reproducible noise (the ledger then says the run is seeded), or leave it out for fresh
        OS entropy.
        """
        from rdpgan import fitting

        return fitting.resume(cls, directory, df, device, noise_seed)

    @staticmethod
    def checkpoint_schema(directory: str | Path) -> Schema:
        """The schema the checkpointed run in ``directory`` encodes its rows with (what its
        rows must be read with to resume)."""
        from rdpgan import fitting

        return fitting.checkpoint_schema(directory)

    def charge_schema(self, release: SchemaRelease, directory: str | Path | None) -> None:
        """Open this run's ledger with what the schema cost, and write it (a run refused after
        its schema drew noise still records it)."""
        from rdpgan import fitting

        fitting.charge_schema(self, release, directory)

    def sample(
        self,
        n: int | None = None,
        label: Any = None,
        seed: int | None = None,
        workers: int = 1,
        conditions: Mapping[str, Any] | None = None,
    ) -> pd.DataFrame:
        """Draw ``n`` synthetic rows (default: the released size of the training table).

        ``label`` fixes the condition to one class; otherwise labels follow the released
        (noisy) label frequencies. ``conditions`` keeps rows that meet them, e.g.
        ``{"sex": "Female", "age": (30, 40)}`` (a level, a number, or an inclusive range).
        ``workers`` threads generate them (see :meth:`rdpgan.sampler.Sampler.sample`: from 2
        on, the rows do not depend on it).
        """
        return self.sampler.sample(n, label, seed, workers, conditions)

    def sample_arrow(
        self,
        n: int | None = None,
        label: Any = None,
        seed: int | None = None,
        workers: int = 1,
        call: int | None = None,
    ) -> pa.Table:
        """:meth:`sample`'s rows as an Arrow table (what files of millions of rows are written
        from, without a Python object per string). ``call``: the rows of the whole call these
        are part of (a file's chunks), which sets how many generated rows match them."""
        return self.sampler.sample_arrow(n, label, seed, workers, call)
