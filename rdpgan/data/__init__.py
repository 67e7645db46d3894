"""Tables in: the declared public schema and the dataset registry."""

from rdpgan.data.datasets import Table, data_root, read_table, split
from rdpgan.data.schema import Categorical, Continuous, Schema

__all__ = ["Categorical", "Continuous", "Schema", "Table", "data_root", "read_table", "split"]
