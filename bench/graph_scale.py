"""How fast the IR readers and the default graph view are on a big program.

Builds a 24- and a 96-layer transformer forward pass (d_model 256, 4 heads, MLP
1024, seq 128, batch 2, each layer under `jax.named_scope(f"layer{i}")` with nested
'attention' / 'mlp' scopes), traces, lowers and compiles each (not timed), then
for each IR times reading it into the graph model plus building the default
view's DOT, and prints the node counts. Then it times Graphviz laying the
default view out (`dot -Tsvg`, what the app's graph panel and the SVG export
wait for), and the slowest layout after expanding one of its boxes (one box of
each look-alike kind: a layer, its attention, ...).

Targets: each IR ≤ 1.0 s and ≤ 300 visible nodes; `dot -Tsvg` ≤ 1.0 s for the
default view and ≤ 2.0 s with one box expanded (layout times are printed as
"n/a" without Graphviz).

    python bench/graph_scale.py
"""

from __future__ import annotations

import importlib.util
import os
import pathlib
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))  # run from anywhere
import viz.graph
from viz.ir.hlo import read_hlo
from viz.ir.jaxpr import read_jaxpr
from viz.ir.kernels import kernel_count
from viz.ir.model import op_histogram
from viz.ir.stablehlo import read_stablehlo

ROOT = pathlib.Path(__file__).resolve().parent.parent


TARGET_S = 1.0
TARGET_VISIBLE = 300
TARGET_LAYOUT_S = 1.0  # dot -Tsvg of the default view
TARGET_EXPAND_S = 2.0  # dot -Tsvg of the default view with one box expanded
N_LAYERS, D_MODEL, N_HEADS, D_MLP, SEQ, BATCH = 24, 256, 4, 1024, 128, 2
MODEL_LAYERS = (24, 96)  # the issue-#20 pair: the default sample's depth, and four times it
SAMPLE = ROOT / "samples" / "transformer_24.py"


def load_model(layers: int = N_LAYERS) -> tuple[Callable[..., Any], Any]:
    """(forward, params): samples/transformer_24.py at `layers` layers when present,
    else the one below."""
    if SAMPLE.exists():
        spec = importlib.util.spec_from_file_location("transformer_24", SAMPLE)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module.forward, module.init_params(n_layers=layers)
    return forward, init_params(layers=layers)


def init_params(seed: int = 0, layers: int = N_LAYERS) -> dict[str, Any]:
    rng = np.random.default_rng(seed)

    def dense(n_in: int, n_out: int) -> jax.Array:
        return jnp.asarray(rng.standard_normal((n_in, n_out), np.float32) / np.sqrt(n_in))

    def norm() -> dict[str, jax.Array]:
        return {"scale": jnp.ones(D_MODEL), "bias": jnp.zeros(D_MODEL)}

    layer = lambda: {  # noqa: E731
        "ln1": norm(),
        "w_qkv": dense(D_MODEL, 3 * D_MODEL),
        "w_out": dense(D_MODEL, D_MODEL),
        "ln2": norm(),
        "w_up": dense(D_MODEL, D_MLP),
        "w_down": dense(D_MLP, D_MODEL),
    }
    return {"layers": [layer() for _ in range(layers)], "ln_final": norm()}


def layernorm(p: dict[str, jax.Array], x: jax.Array) -> jax.Array:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + 1e-5) * p["scale"] + p["bias"]


def attention(p: dict[str, jax.Array], x: jax.Array) -> jax.Array:
    b, s, d = x.shape
    q, k, v = jnp.split(x @ p["w_qkv"], 3, axis=-1)
    q, k, v = (t.reshape(b, s, N_HEADS, d // N_HEADS).transpose(0, 2, 1, 3) for t in (q, k, v))
    scores = jnp.einsum("bhqd,bhkd->bhqk", q, k) / jnp.sqrt(d // N_HEADS)
    scores = jnp.where(jnp.tril(jnp.ones((s, s), bool)), scores, -jnp.inf)
    out = jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(scores, -1), v)
    return out.transpose(0, 2, 1, 3).reshape(b, s, d) @ p["w_out"]


def forward(params: dict[str, Any], x: jax.Array) -> jax.Array:
    for i, layer in enumerate(params["layers"]):
        with jax.named_scope(f"layer{i}"):
            with jax.named_scope("attention"):
                x = x + attention(layer, layernorm(layer["ln1"], x))
            with jax.named_scope("mlp"):
                x = x + jax.nn.gelu(layernorm(layer["ln2"], x) @ layer["w_up"]) @ layer["w_down"]
    return layernorm(params["ln_final"], x)


def measure(
    name: str, read: Callable[[Any], Any], ir: Any, extra: Callable[[Any], str] | None = None
) -> bool:
    start = time.perf_counter()
    graph = read(ir)
    summary = viz.graph.summary(graph)
    seconds = time.perf_counter() - start
    ops = sum(op_histogram(graph).values())
    layout = layout_seconds(summary["dot"])
    expand, box = worst_expand(graph)
    ok = (
        seconds <= TARGET_S
        and summary["visible_nodes"] <= TARGET_VISIBLE
        and (layout is None or layout <= TARGET_LAYOUT_S)
        and (expand is None or expand <= TARGET_EXPAND_S)
    )
    print(
        f"{name:<10} {seconds:6.3f} s   total nodes {summary['total_nodes']:5d}   "
        f"visible {summary['visible_nodes']:3d}   ops {ops:5d}   dot {len(summary['dot']):6d} chars"
        f"{extra(graph) if extra else ''}   layout {_s(layout)}   "
        f"expand one box ≤ {_s(expand)} ({box})   {'ok' if ok else 'OVER TARGET'}"
    )
    return ok


def layout_seconds(dot: str) -> float | None:
    """How long `dot -Tsvg` takes on `dot` (None without Graphviz)."""
    exe = shutil.which("dot")
    if exe is None:
        return None
    start = time.perf_counter()
    subprocess.run([exe, "-Tsvg", "-o", os.devnull], input=dot.encode(), check=True)
    return time.perf_counter() - start


def worst_expand(graph: Any) -> tuple[float | None, str]:
    """The slowest layout of the default view with one box expanded, and that box."""
    view = viz.graph.default_view(graph)
    items, _ = viz.graph.visible(view)
    kinds: set[tuple[str, int]] = set()
    worst: tuple[float | None, str] = (None, "no boxes")
    for item in items:
        kind = (re.sub(r"\d+", "#", item.label), item.inner_ops)
        if item.kind != "group" or kind in kinds:
            continue
        kinds.add(kind)
        seconds = layout_seconds(viz.graph.to_dot(viz.graph.expand(view, item.path)))
        if seconds is None:
            return None, "no Graphviz"
        if worst[0] is None or seconds > worst[0]:
            worst = (seconds, "/".join(item.path))
    return worst


def _s(seconds: float | None) -> str:
    return "n/a" if seconds is None else f"{seconds:.2f} s"


def main() -> int:
    print(
        f"target: ≤ {TARGET_S} s per IR (read + default-view DOT), ≤ {TARGET_VISIBLE} visible, "
        f"layout ≤ {TARGET_LAYOUT_S} s (≤ {TARGET_EXPAND_S} s with one box expanded)"
    )
    results = [ok for layers in MODEL_LAYERS for ok in measure_model(layers)]
    return 0 if all(results) else 1


def measure_model(layers: int) -> list[bool]:
    fn, params = load_model(layers)
    x = jax.ShapeDtypeStruct((BATCH, SEQ, D_MODEL), jnp.float32)
    start = time.perf_counter()
    traced = jax.jit(fn).trace(params, x)
    lowered = traced.lower()
    compiled = lowered.compile()
    module = lowered.compiler_ir("stablehlo")
    hlo_lines = len(compiled.as_text().splitlines())
    print(
        f"\nmodel: {layers} layers, d_model {D_MODEL}; trace+lower+compile "
        f"{time.perf_counter() - start:.1f} s (not timed below); "
        f"{len(traced.jaxpr.eqns)} top-level eqns, {hlo_lines} lines of optimized HLO"
    )
    return [
        measure("jaxpr", read_jaxpr, traced.jaxpr),
        measure("stablehlo", read_stablehlo, module),
        measure("compiled", read_hlo, compiled, lambda g: f"   kernels {kernel_count(g)}"),
    ]


if __name__ == "__main__":
    sys.exit(main())
