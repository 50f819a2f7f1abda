"""One spec item as the Python a user would write to build its abstract value
(`f32[8,128]` → `jax.ShapeDtypeStruct((8, 128), jnp.float32)`), for the cache lab's
snippet. Text only: nothing here imports jax or evaluates the item.
"""

from __future__ import annotations

import ast

from viz.source import parse_python
from viz.spec.partition import partition_of, sharded_parts
from viz.spec.text import (
    DTYPES,
    ItemError,
    SpecError,
    SpecItem,
    looks_like_dtype,
    parse_item_ast,
    rewrite_empty_subscripts,
    split_items,
    unknown_dtype_message,
)


def python_expression(item: str, batch: str | None = None) -> str:
    """One spec item as Python that builds its abstract value: arrays become
    ``jax.ShapeDtypeStruct((8, 128), jnp.float32)``, ``key`` becomes
    ``jax.random.key(0)``, containers keep their shape and other expressions pass
    through. ``batch`` names the leading dimension of an array item (the item must be
    one). Text only, no jax; SpecError for anything that is not a spec item."""
    (parsed,) = split_items(item) or [SpecItem(1, "", "", "empty item")]
    if parsed.problem:
        raise SpecError(parsed.problem, 1, item)
    src = "(\n" + rewrite_empty_subscripts(parsed.text, parsed.masked) + "\n)"
    try:
        root = parse_item_ast(src, parsed).body
        if batch is not None:
            if _dtype_subscript(root) and root.value.id not in DTYPES:  # type: ignore[attr-defined]
                raise ItemError(unknown_dtype_message(root.value.id))  # type: ignore[attr-defined]
            if not (_dtype_subscript(root) and _shape_nodes(root)):
                raise ItemError("the batch argument must be an array with a batch axis")
            _set_leading_dimension(root, ast.Name(batch))
        return ast.unparse(_ToPython().visit(root))
    except ItemError as err:
        raise SpecError(err.reason, 1, item) from None


def _dtype_subscript(node: ast.expr) -> bool:
    return isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name)


def _shape_nodes(node: ast.Subscript) -> list[ast.expr]:
    dims = node.slice
    if isinstance(dims, ast.Tuple):
        return list(dims.elts)
    return [] if isinstance(dims, ast.Tuple | ast.Constant) and dims.value == () else [dims]


def _set_leading_dimension(node: ast.Subscript, dim: ast.expr) -> None:
    if isinstance(node.slice, ast.Tuple):
        node.slice.elts[0] = dim
    else:
        node.slice = dim


def _expression(text: str) -> ast.expr:
    return parse_python(text, "eval").body  # type: ignore[attr-defined]


class _ToPython(ast.NodeTransformer):
    """Spec syntax → the Python a user would write (see `python_expression`)."""

    def visit_Subscript(self, node: ast.Subscript) -> ast.expr:
        if not _dtype_subscript(node):
            return self.generic_visit(node)
        name = node.value.id  # type: ignore[attr-defined]
        if name not in DTYPES:
            if looks_like_dtype(name):
                raise ItemError(unknown_dtype_message(name))
            return self.generic_visit(node)
        shape = ast.Tuple([self.visit(d) for d in _shape_nodes(node)])
        dtype = "bool_" if name == "bool" else DTYPES[name].name
        return ast.Call(
            _expression("jax.ShapeDtypeStruct"),
            [shape, _expression(f"jnp.{dtype}")],
            [],
        )

    def visit_Name(self, node: ast.Name) -> ast.expr:
        return _expression("jax.random.key(0)") if node.id == "key" else node

    def visit_BinOp(self, node: ast.BinOp) -> ast.expr:
        parts = sharded_parts(node)
        if parts is None:
            return self.generic_visit(node)
        array = self.visit(parts[0])
        spec = _expression(f"jax.sharding.PartitionSpec{str(partition_of(parts[1]))[1:]}")
        if isinstance(array, ast.Call) and ast.unparse(array.func) == "jax.ShapeDtypeStruct":
            array.keywords.append(ast.keyword("sharding", spec))  # under jax.set_mesh(mesh)
            return array
        return self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> ast.expr:
        if isinstance(node.func, ast.Name) and node.func.id == "key":
            node.func = _expression("jax.random.key")
        return self.generic_visit(node)
