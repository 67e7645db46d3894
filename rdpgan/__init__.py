"""rdpgan: differentially private conditional GANs for tables, with an honest privacy ledger.

The public face: ``DPCGAN(epsilon=8, delta=1e-5).fit(df, target=..., schema=...)``,
``.sample(n)``, ``.save(dir)`` and ``DPCGAN.load(dir)`` (also exported as :func:`load`).
"""

from rdpgan.synthesizer import DPCGAN

load = DPCGAN.load

__all__ = ["DPCGAN", "load"]
__version__ = "0.1.0"
