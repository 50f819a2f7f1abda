"""Tests for the ready-made samples in samples/ and their index viz.samples."""

from __future__ import annotations

import ast
import importlib.util
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

import viz.samples

REPO = Path(__file__).resolve().parent.parent
SAMPLES_DIR = REPO / "samples"
SAMPLE_FILES = sorted(p for p in SAMPLES_DIR.glob("*.py") if not p.name.startswith("_"))
SLOW_SAMPLES = {"transformer_24"}
ALLOWED_IMPORTS = {"jax", "numpy"}


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _functions(tree: ast.Module) -> dict[str, ast.FunctionDef]:
    return {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}


def _param_names(fn: ast.FunctionDef) -> list[str]:
    a = fn.args
    return [p.arg for p in [*a.posonlyargs, *a.args, *a.kwonlyargs]]


# ---------------------------------------------------------------- read_metadata


def test_read_metadata_literals_only():
    code = (
        "import jax\n"
        "TITLE = 'T'\n"
        "STATIC = ['n']\n"
        "ORDER: int = 3\n"
        "W = jax.numpy.ones(3)\n"  # not a literal: skipped
        "lower = 1\n"  # not uppercase: skipped
        "def f():\n    INNER = 'x'\n"  # not top level: skipped
    )
    assert viz.samples.read_metadata(code) == {"TITLE": "T", "STATIC": ["n"], "ORDER": 3}


@pytest.mark.parametrize("code", ["def f(:\n", "TITLE = 'unterminated\n", "\x00", ""])
def test_read_metadata_tolerates_bad_source(code):
    assert viz.samples.read_metadata(code) == {}


# ---------------------------------------------------------------- sample index


def test_at_least_14_samples_unique_names():
    samples = viz.samples.list_samples()
    names = [s.name for s in samples]
    assert len(samples) >= 14
    assert len(names) == len(set(names))
    # Every sample file is listed: none is silently skipped for bad metadata.
    assert set(names) == {p.stem for p in SAMPLE_FILES}


def test_list_samples_sorted_by_order_then_name():
    samples = viz.samples.list_samples()
    keys = [(s.order, s.name) for s in samples]
    assert keys == sorted(keys)


def test_default_sample_is_dot_plus_one():
    sample = viz.samples.default_sample()
    assert sample.name == "dot_plus_one"
    assert sample.function == "f"
    assert sample.args == "f32[256,512], f32[512,128]"
    assert sample.static == ()


def test_get_sample():
    s = viz.samples.get_sample("arange_static")
    assert s.static == ("n",)
    assert s.path == SAMPLES_DIR / "arange_static.py"
    assert s.code == s.path.read_text(encoding="utf-8")
    assert viz.samples.get_sample("arange_static.py") == s
    with pytest.raises(KeyError, match=r"no_such_sample.*available samples: .*dot_plus_one"):
        viz.samples.get_sample("no_such_sample")


def test_sample_extra_metadata():
    assert viz.samples.get_sample("relu_python_if").extra == {"EXPECT_ERROR": "control_flow"}
    assert viz.samples.get_sample("nonzero_dynamic").expect_error == "value_dependent_shape"
    assert viz.samples.get_sample("outer_inner").extra == {"INNER": "f"}
    assert viz.samples.get_sample("unrolled_loop").extra == {"LOOP_STEP": "step"}
    assert viz.samples.get_sample("batched_model").extra == {"BATCH_ARG": "x"}
    assert viz.samples.get_sample("dot_plus_one").extra == {}


def test_list_samples_other_directory(tmp_path):
    (tmp_path / "b.py").write_text("FUNCTION = 'g'\nARGS = 'f32[2]'\nORDER = 1\n")
    (tmp_path / "a.py").write_text(
        "TITLE = 'A'\nDESCRIPTION = 'd'\nFUNCTION = 'f'\nARGS = '3'\nSTATIC = 'n'\nORDER = 1\n"
        "INNER = 'h'\n"
    )
    (tmp_path / "broken.py").write_text("def (:\n")  # unparsable: skipped
    (tmp_path / "nofunc.py").write_text("TITLE = 'x'\n")  # no FUNCTION/ARGS: skipped
    (tmp_path / "_private.py").write_text("FUNCTION = 'f'\nARGS = ''\n")
    samples = viz.samples.list_samples(tmp_path)
    assert [s.name for s in samples] == ["a", "b"]
    a, b = samples
    assert (a.title, a.description, a.static, a.extra) == ("A", "d", ("n",), {"INNER": "h"})
    assert (b.title, b.description, b.static, b.order) == ("b", "", (), 1)
    assert viz.samples.default_sample(tmp_path).name == "a"
    assert viz.samples.list_samples(tmp_path / "missing") == []
    with pytest.raises(LookupError):
        viz.samples.default_sample(tmp_path / "missing")


def test_viz_samples_never_imports_jax():
    code = (
        "import sys, viz.samples as s; s.list_samples(); s.default_sample(); "
        "assert 'jax' not in sys.modules, sorted(m for m in sys.modules if 'jax' in m)"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr


# ---------------------------------------------------------------- per-file metadata


@pytest.mark.parametrize("path", SAMPLE_FILES, ids=lambda p: p.stem)
def test_sample_metadata(path: Path):
    assert re.fullmatch(r"[a-z][a-z0-9_]*", path.stem), "file names are snake_case"
    tree = _tree(path)
    meta = viz.samples.read_metadata(path.read_text(encoding="utf-8"))
    for key, typ in [("TITLE", str), ("DESCRIPTION", str), ("FUNCTION", str), ("ARGS", str)]:
        assert isinstance(meta.get(key), typ), f"{key} must be a {typ.__name__}"
        assert meta[key].strip(), f"{key} must not be empty"
    assert isinstance(meta.get("STATIC"), list), "STATIC must be a list"
    assert all(isinstance(s, str) for s in meta["STATIC"])
    assert isinstance(meta.get("ORDER"), int) and not isinstance(meta["ORDER"], bool)

    functions = _functions(tree)
    assert meta["FUNCTION"] in functions, f"FUNCTION {meta['FUNCTION']!r} is not defined"
    params = _param_names(functions[meta["FUNCTION"]])
    for name in meta["STATIC"]:
        assert name in params, f"STATIC {name!r} is not a parameter of {meta['FUNCTION']}"

    if "EXPECT_ERROR" in meta:
        assert meta["EXPECT_ERROR"] in viz.samples.ERROR_KINDS
    for key in ("INNER", "LOOP_STEP"):
        if key in meta:
            assert meta[key] in functions, f"{key} {meta[key]!r} is not a function in the file"
    if "BATCH_ARG" in meta:
        assert meta["BATCH_ARG"] in params

    # Only jax and numpy (plus the standard library's nothing) are imported.
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots = {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            roots = {(node.module or "").split(".")[0]}
        else:
            continue
        assert roots <= ALLOWED_IMPORTS, f"line {node.lineno} imports {roots - ALLOWED_IMPORTS}"


@pytest.mark.parametrize("path", SAMPLE_FILES, ids=lambda p: p.stem)
def test_the_metadata_follows_the_docstring_for_the_editor_to_fold_it(path: Path):
    """TITLE = …, ORDER = … are the app's, not the user's code: they sit right after the
    docstring, and the editor shows the code from the first line after them."""
    code = path.read_text(encoding="utf-8")
    first = viz.samples.metadata_end(code)
    head, rest = code.splitlines()[: first - 1], code.splitlines()[first - 1 :]
    keys = {*viz.samples.REQUIRED_KEYS, *viz.samples.EXTRA_KEYS}
    folded, meta = viz.samples.read_metadata("\n".join(head)), viz.samples.read_metadata(code)
    assert {k: v for k, v in meta.items() if k in keys} == folded
    assert rest[0].strip(), "the code starts at a line of code"


def test_metadata_end_is_the_line_after_the_constants_and_1_without_them():
    code = '"""Doc."""\n\nTITLE = "t"\nARGS = (\n    "f32[3]"\n)\n\nimport jax\nW = 3\n'
    assert viz.samples.metadata_end(code) == 8  # `import jax`: W is not metadata
    assert viz.samples.metadata_end("import jax\nTITLE = 't'\n") == 1
    assert viz.samples.metadata_end("def (") == 1


def test_sample_orders_unique():
    orders = [s.order for s in viz.samples.list_samples()]
    assert len(orders) == len(set(orders))


# ---------------------------------------------------------------- trace / compile


def _load_module(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"jitscope_sample_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _abstract_args(spec: str, module: ModuleType) -> tuple:
    """Abstract args for ``spec``, read by the one spec parser (viz.spec)."""
    from viz.spec import abstract_args, parse_spec

    return tuple(abstract_args(parse_spec(spec, vars(module))))


def _sample_params():
    for path in SAMPLE_FILES:
        marks = [pytest.mark.slow] if path.stem in SLOW_SAMPLES else []
        yield pytest.param(path, id=path.stem, marks=marks)


@pytest.mark.parametrize("path", list(_sample_params()))
def test_sample_traces_and_compiles(path: Path):
    import jax

    sample = viz.samples.get_sample(path.stem)
    module = _load_module(path)
    fn = getattr(module, sample.function)
    args = _abstract_args(sample.args, module)
    jitted = jax.jit(fn, static_argnames=sample.static)

    if sample.expect_error:
        # Intentional failures happen while tracing, before any lowering.
        with pytest.raises(jax.errors.ConcretizationTypeError):
            jitted.trace(*args)
        return

    traced = jitted.trace(*args)
    assert traced.jaxpr.eqns, "the jaxpr has no equations"
    compiled = traced.lower().compile()
    assert compiled.as_text()

    # Optional metadata points at things that really work.
    if "INNER" in sample.extra:
        inner = getattr(module, sample.extra["INNER"])
        jax.jit(inner).trace(*args).lower().compile()
    if "LOOP_STEP" in sample.extra:
        step = getattr(module, sample.extra["LOOP_STEP"])
        out = jax.jit(step).trace(args[0]).out_info
        assert (out.shape, out.dtype) == (args[0].shape, args[0].dtype)
    if "BATCH_ARG" in sample.extra:
        i = _param_names(_functions(_tree(path))[sample.function]).index(sample.extra["BATCH_ARG"])
        assert args[i].ndim >= 1


def test_elementwise_chain_has_24_ops():
    import jax

    module = _load_module(SAMPLES_DIR / "elementwise_chain.py")
    x = jax.ShapeDtypeStruct((512, 512), "float32")
    # jax.nn.sigmoid is the logistic primitive: one equation per op.
    prims = [e.primitive.name for e in jax.make_jaxpr(module.chain)(x).eqns]
    assert len(prims) == 24, prims


def test_unrolled_matches_scanned():
    import jax
    import jax.numpy as jnp

    module = _load_module(SAMPLES_DIR / "unrolled_loop.py")
    x = jnp.linspace(-1.0, 1.0, 64 * 64, dtype=jnp.float32).reshape(64, 64)
    a = jax.jit(module.unrolled, static_argnames=["n"])(x, 5)
    b = jax.jit(module.scanned, static_argnames=["n"])(x, 5)
    assert jnp.allclose(a, b, atol=1e-5)
