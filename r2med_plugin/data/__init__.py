"""Loading and validation: the only code that touches the hub or data files."""

from r2med_plugin.data.hub import DATA_DIR_ENV
from r2med_plugin.data.loader import load_task

__all__ = ["DATA_DIR_ENV", "load_task"]
