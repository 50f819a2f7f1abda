"""Record a Pallas program as JAX lowers it for a TPU, on a machine without one.

JAX lowers for a platform it has no device of (`Traced.lower(lowering_platforms=
("tpu",))`): a `pl.pallas_call` that is not interpreted becomes the real
`stablehlo.custom_call @tpu_custom_call`, its kernel compiled by Pallas to a Mosaic
module, serialized into the call's `backend_config`. Nothing runs and XLA does not
compile, so the StableHLO is the TPU's own: the fixture the StableHLO reader's and the
kernel IR reader's tests read (tests/fixtures/tpu_v5e_lowered/<program>/).

Writes under DIR/pallas_forward/: the program (`pallas_forward.py`, bench/tpu_check.py's
Pallas program, not interpreted), its StableHLO with locations (`stablehlo.mlir`), and
`manifest.json` (jax and jaxlib versions, the platform it was lowered for, the command).

Usage:
  python bench/tpu_lowering.py tests/fixtures/tpu_v5e_lowered
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from tpu_check import PALLAS_ARGS, PALLAS_CODE  # noqa: E402

PROGRAM = "pallas_forward"
PLATFORM = "tpu"
SHAPE = (256, 512)  # PALLAS_ARGS: f32[256,512], f32[256,512]


def record(out: Path) -> Path:
    import jax

    folder = out / PROGRAM
    folder.mkdir(parents=True, exist_ok=True)
    source = folder / f"{PROGRAM}.py"
    source.write_text(PALLAS_CODE.format(interpret=False))
    spec = importlib.util.spec_from_file_location(PROGRAM, source)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    args = [jax.ShapeDtypeStruct(SHAPE, jax.numpy.float32)] * 2
    lowered = jax.jit(module.forward).trace(*args).lower(lowering_platforms=(PLATFORM,))
    (folder / "stablehlo.mlir").write_text(lowered.as_text(debug_info=True))
    manifest = {
        "program": PROGRAM,
        "args": PALLAS_ARGS,
        "lowered_for": PLATFORM,
        "ran_on": jax.devices()[0].platform,
        "versions": {p: importlib.metadata.version(p) for p in ("jax", "jaxlib")},
        "recorded": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "by": f"python bench/tpu_lowering.py {out.as_posix()}",
    }
    (folder / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    return folder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="the fixtures' folder")
    folder = record(parser.parse_args().out)
    print(f"recorded {folder}")


if __name__ == "__main__":
    main()
