"""Which of sampling's loops a call runs: numpy passes (:mod:`rdpgan.numpy_kernels`) or their
compiled twins (:mod:`rdpgan.kernels`, numba).

The compiled loops run a generator pass about twice as fast and raking's step about four times,
but numba costs about a second a process before the first of them runs (its import, then its
set-up at the first call, which imports scipy.linalg and cffi): half of a
``python -m rdpgan.sample n=1000`` (issue 54). That second is won back only by calls that
generate hundreds of thousands of rows. A call chooses once, by the rows it generates, so its
rows depend on its size, settings and seed alone, never on what the process ran before. (A
call with conditions samples in batches, each of which chooses its pool, and its loops, for
itself.)
"""

from __future__ import annotations

from types import ModuleType

from rdpgan import numpy_kernels

# Generated rows from which a call runs the compiled loops. A million rows from Adult's model
# (about 4 million generated) took 22.6 s with numpy's loops against 10.7 s compiled
# (results/speed.md, bench_sampling.py at 00e21cc): 3 us more per generated row. Raked from
# pools of 32, where the sweeps weigh more, 262,144 generated rows took 2.6 s against 0.9 s
# (ad hoc, a default run's choice): 6.5 us a row, so numba's second is repaid from about
# 140,000. A quarter of a raking block: a default run's choice (a herded call of 131,072
# generated rows among them) and output take the compiled loops, a 1,000-row file numpy's.
COMPILED_FROM = 131_072


def for_rows(rows: int) -> ModuleType:
    """The loops for a call that generates ``rows`` rows: a module with ``layer_norm``,
    ``draw_codes``, ``rescale_and_count``, ``lexicographic_order`` and ``herd_picks``."""
    if rows < COMPILED_FROM:
        return numpy_kernels
    from rdpgan import kernels  # (here: numba is imported by the calls that take it alone)

    return kernels
