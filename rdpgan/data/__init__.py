"""Tables in: the declared public schema and the dataset registry."""

from rdpgan.data.datasets import data_root, read_cells
from rdpgan.data.schema import Categorical, Continuous, Schema
from rdpgan.data.split import split

__all__ = ["Categorical", "Continuous", "Schema", "data_root", "read_cells", "split"]
