"""rdpgan: differentially private conditional GANs for tables, with an honest privacy ledger.

The public face: ``DPCGAN(epsilon=8, delta=1e-5).fit(df, target=..., schema=...)``,
``.sample(n)``, ``.save(dir)`` and ``DPCGAN.load(dir)`` (also exported as :func:`load`).
"""

import os

# Idle OpenMP threads sleep instead of spinning on a core another process needs (see
# rdpgan/threads.py). OpenMP reads this when torch loads it, so it is set before any import of
# torch; a value the user set wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from rdpgan.synthesizer import DPCGAN

load = DPCGAN.load

__all__ = ["DPCGAN", "load"]
__version__ = "0.1.0"
