"""jitscope's engine: see what jax.jit does to one function.

`from viz import analyze` gives the Python API. Importing `viz` itself does not
import jax, so the Streamlit pages can use the jax-free modules (graph views,
samples, reports, the worker client) without it.
"""

from typing import Any

__all__ = ["analyze", "recording", "show"]


def load_ipython_extension(ipython: Any) -> None:
    """`%load_ext viz`: the `%jitscope` and `%%jitscope_record` magics (viz.notebook)."""
    from viz.notebook import load_ipython_extension

    load_ipython_extension(ipython)


def __getattr__(name: str) -> Any:
    if name == "analyze":
        from viz.pipeline import analyze

        return analyze
    if name == "show":
        from viz.notebook import show

        return show
    if name == "recording":
        from viz.recorder import recording

        return recording
    raise AttributeError(name)
