"""A Pallas kernel's own IR where the platform lowers it to Mosaic (the TPU): the
kernel's MLIR module, which JAX serializes into its custom call's `backend_config`, as
readable MLIR text. JAX side (the StableHLO reader asks it of each custom call).

How JAX writes it (jax/_src/tpu_custom_call.py, `CustomCallBackendConfig.to_json`): a
JSON object `{"custom_call_config": {"body": <base64>, ...}}`, the body the module as MLIR
bytecode after Mosaic's `mosaic-serde{serialize=true}` pass, which renames each op into
the versioned `stable_mosaic.` namespace. The same pass with `serialize=false` names them
back (`arith.addf`, `vector.load`, `tpu.vector_store`), as Mosaic's compiler reads them.
"""

from __future__ import annotations

import base64
import binascii
import io
import json
from typing import Any

from viz.jax_private import mosaic_context
from viz.platforms.trace import PALLAS_TARGET as CALL_TARGET

DESERIALIZE = "builtin.module(mosaic-serde{serialize=false})"


def is_kernel_call(call_target: str) -> bool:
    """Whether a custom call with this target holds a kernel's own IR (a Mosaic one)."""
    return call_target == CALL_TARGET


def kernel_body(backend_config: str) -> bytes | None:
    """The Mosaic module's bytecode from a custom call's `backend_config` (None: the
    config holds none, or is not JAX's JSON)."""
    try:
        body = json.loads(backend_config)["custom_call_config"]["body"]
        return base64.b64decode(body, validate=True)
    except (ValueError, KeyError, TypeError, binascii.Error):
        return None


def kernel_text(backend_config: str) -> str | None:
    """The kernel's Mosaic module as MLIR text (no locations, as the app prints every
    IR); None where the config holds no module or this jaxlib cannot read it."""
    body = kernel_body(backend_config)
    context = mosaic_context() if body else None
    if context is None:
        return None
    from jaxlib.mlir import ir
    from jaxlib.mlir.passmanager import PassManager

    with context, ir.Location.unknown():
        try:
            module = ir.Module.parse(body)
            PassManager.parse(DESERIALIZE).run(module.operation)
        except Exception:  # MLIR's errors are plain exceptions: an unreadable body
            return None
        return _printed(module)


def _printed(module: Any) -> str:
    out = io.StringIO()
    module.operation.print(file=out, enable_debug_info=False)
    return out.getvalue()
