"""IR readers: jaxpr, StableHLO and optimized HLO, each into `viz.ir.model.Graph`.

`from viz.ir import read_jaxpr, read_stablehlo, read_hlo` imports the reader
(and jax) on first use only, so `viz.ir.model` stays importable without jax.
"""

from importlib import import_module
from typing import Any

__all__ = ["read_hlo", "read_jaxpr", "read_stablehlo"]

_READERS = {
    "read_jaxpr": "viz.ir.jaxpr",
    "read_stablehlo": "viz.ir.stablehlo",
    "read_hlo": "viz.ir.hlo",
}


def __getattr__(name: str) -> Any:
    if name in _READERS:
        return getattr(import_module(_READERS[name]), name)
    raise AttributeError(name)
