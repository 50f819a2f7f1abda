"""What made a function compile again, in words, with the fix (stdlib only).

`advise` reads one function's totals and its compiles (those kept with details) and
names the dominant reason among its *recompiles*: the first compile of a function
is no fault of anyone's.
"""

from __future__ import annotations

import builtins
import linecache
import re
from collections import Counter

from viz.cache.signature import (
    NEW,
    NODE_TYPE_FIX,
    Reason,
    node_type_changed,
    weak_type_fix,
    weak_type_text,
)
from viz.recorder.closures import FUNCTION_WORDS, Locals, located, read_locals
from viz.recorder.model import (
    AVOIDABLE,
    CACHE,
    CLEARED,
    FIRST_COMPILE,
    LOOP_LAYERS,
    Compile,
    FunctionStats,
    installed_parts,
    jitted,
    short_path,
)
from viz.units import plural

FIXES = {
    "shape": "pad to a few bucket sizes (Batch buckets page)",
    "new_function": "make it once, outside the test or loop",
    "static_value": "every new value compiles again: make it a dynamic argument if it varies",
    "dtype": "cast once where data enters, e.g. x.astype(jnp.float32)",
    "pytree": "keep the structure fixed: same keys, same lengths",
    "sharding": "place inputs the same way every call (jax.device_put)",
    "device": "put inputs on the same device every call",
    "config": "set it once, before the first call",
}


def recompile_kinds(stats: FunctionStats, compiles: list[Compile]) -> Counter[str]:
    """Reason kinds over the recompiles (the first compiles' new_function left out: one
    per computation of the function, `jit(f)` and `jit(grad(f))`)."""
    kinds = Counter(stats.reasons)
    firsts = sum(
        any(r.kind == "new_function" and r.before == FIRST_COMPILE for r in c.reasons)
        for c in compiles
    )
    kinds["new_function"] = max(kinds["new_function"] - max(firsts, 1), 0)
    return +kinds


LIBRARY_KINDS = frozenset({"new_function", "static_value", "config"})  # a new object's


def advise(stats: FunctionStats, compiles: list[Compile], cwd: str | tuple[str, ...]) -> str:
    """One line per kind of recompile that occurred, the kind that explains the most
    compiles first ('x dim 0 took 3 values (8, 9, 10) → pad to buckets (…)'), joined by
    newlines; '' for one compile. A jit that a library builds is spoken of as the
    library's: the user is told what they can change, or that it is not in their code."""
    kinds = recompile_kinds(stats, compiles)
    if stats.compiles <= 1 or not kinds:
        return ""
    lines = [_kind_advice(kind, stats, compiles, cwd) for kind, _ in kinds.most_common()]
    return "\n".join(dict.fromkeys(line for line in lines if line))


def _of_a_new_object(kind: str, compiles: list[Compile]) -> bool:
    """Whether recompiles of this kind can be a new object's (a jit wrapper, a function
    a library makes on each call): a static value's only where one is new, not where a
    value differs ('args 1.0 → 2.0': the user's data)."""
    if kind != "static_value":
        return kind in LIBRARY_KINDS
    return any(r.kind == kind and r.after.startswith(NEW) for c in compiles for r in c.reasons)


def _kind_advice(
    kind: str, stats: FunctionStats, compiles: list[Compile], cwd: str | tuple[str, ...]
) -> str:
    """The words and the fix for the recompiles of one kind."""
    library = _library_text(stats, compiles) if _of_a_new_object(kind, compiles) else ""
    if library:
        return library
    cache = [r for c in compiles for r in c.reasons if r.arg == CACHE]
    if kind == "config" and cache:
        return _cache_text(cache, stats)
    if kind == "static_value":
        statics = [r for c in compiles for r in c.reasons if r.kind == kind]
        arg = _commonest_arg(kind, compiles)
        new_objects = [r for r in statics if r.arg == arg and r.after.startswith(NEW)]
        if new_objects:
            return _new_object_text(arg, new_objects, stats, compiles, cwd)
    what = _describe(kind, stats, compiles, cwd)
    if kind == "config" and _transformed(compiles):
        return f"{what} → {TRANSFORM_FIX}"
    reads = read_locals(stats.defined_at, stats.name) if kind == "new_function" else None
    loop = next((c.wraps[0] for c in compiles if c.wraps[:1] and c.wraps[0] in LOOP_LAYERS), "")
    if kind == "new_function" and loop:
        return f"{what} → {_loop_fix(reads, loop, compiles)}"
    if reads is not None:  # a jit made anew, of a function that reads the caller's locals
        return (
            f"{what} → {reads.reads}: jit it once, outside `{reads.outer}`, with "
            f"{reads.as_arguments} (functools.partial(f, {reads.bare}) binds {reads.them})"
        )
    if kind == "weak_type":
        first = _first_reason(kind, compiles)
        return f"{what} → {weak_type_fix(first.arg, first.before, first.after)}"
    if kind == "static_value" and _numbers_filter_jit_holds(compiles):
        return f"{what} → {FILTER_JIT_NUMBER_FIX}"
    first = _first_reason(kind, compiles)
    if kind == "pytree" and node_type_changed(first.before, first.after):
        return f"{what} → {NODE_TYPE_FIX}"
    if kind == "shape" and _library_made(compiles) is not None:
        return f"{what} → {_library_shape_fix(compiles)}"
    if kind == "shape" and _rank_changed(compiles):
        return f"{what} → {RANK_FIX}"  # a scalar, then a vector: no bucket pads that
    return f"{what} → {FIXES[kind]}" if kind in FIXES else what


RANK_FIX = "pass it with the same number of dimensions every call"
FILTER_JIT_NUMBER_FIX = (
    "equinox's filter_jit holds a Python number static, as it does all that is not an "
    "array: pass it as an array, jnp.asarray(value), and one compile serves every value"
)


def _numbers_filter_jit_holds(compiles: list[Compile]) -> bool:
    """Whether the static values that changed most often are Python numbers that
    equinox's filter_jit held static by its rule (none that the user marked static)."""
    arg = _commonest_arg("static_value", compiles)
    values = [
        leaf.static_value
        for c in compiles
        if c.wraps[:1] == ["filter_jit"] and arg not in c.static
        for leaf in c.signature
        if leaf.arg == arg and leaf.static_value is not None  # not once passed as an array
    ]
    return bool(values) and all(_is_number(v) for v in values)


def _is_number(text: str | None) -> bool:
    try:
        float(text or "")
    except ValueError:
        return False
    return True


TRANSFORM_FIX = "jit the transformed function once, e.g. jax.jit(jax.grad(f))"


def _transformed(compiles: list[Compile]) -> list[str]:
    """The transformations the function compiled under, in order of first appearance."""
    return _distinct(c.transform for c in compiles)


def _describe(kind: str, stats: FunctionStats, compiles: list[Compile], cwd: str) -> str:
    arg = _commonest_arg(kind, compiles)
    if kind == "shape":
        return _shape_text(arg, compiles)
    if kind == "new_function":
        return _new_jit_text(stats, compiles, cwd)
    if kind == "static_value":
        values = _distinct(
            leaf.static_value for c in compiles for leaf in c.signature if leaf.arg == arg
        )
        return f"static {arg} took {len(values)} values ({_list(values)})"
    if kind == "weak_type":
        first = _first_reason(kind, compiles)
        return weak_type_text(first.arg, first.before, first.after)
    if kind == "dtype":
        values = _distinct(leaf.dtype for c in compiles for leaf in c.signature if leaf.arg == arg)
        return f"dtype of {arg} took {len(values)} values ({_list(values)})"
    if kind == "pytree":
        first = _first_reason(kind, compiles)
        return f"the structure of {arg} changed ({first.before} → {first.after})"
    if kind == "config" and _transformed(compiles):
        under = ", ".join(t for t in _transformed(compiles))
        return f"compiled again under each transformation ({under}), apart from direct calls"
    if kind == "config":
        return f"setting {arg} changed"
    return f"{kind.replace('_', ' ')} of {arg} changed"


def _first_reason(kind: str, compiles: list[Compile]) -> Reason:
    """The first reason of this kind that names the commonest argument (none kept: '?')."""
    arg = _commonest_arg(kind, compiles)
    found = (r for c in compiles for r in c.reasons if r.kind == kind and r.arg == arg)
    return next(found, Reason(arg, kind, "?", "?"))


def _library_text(stats: FunctionStats, compiles: list[Compile]) -> str:
    """'fakelib builds a new jit wrapper for each `fakelib.run`: each call compiles once
    (1 of 3 avoidable); it is not in your code', where a library made the jit (its
    `created_at` is the library's, `called_from` the user's line) and what is new on
    each call is the library's; '' otherwise."""
    made = [c for c in compiles if c.called_from and c.created_at]
    library = _package(made[-1].created_at or "") if made else ""
    if not library:
        return ""
    new_objects = [r.after for c in compiles for r in c.reasons if r.after.startswith(NEW)]
    if any(f"({library}/" not in text for text in new_objects if "(" in text):
        return ""  # a new object of the user's: the usual advice says where
    call = _called_expression(made[-1].called_from or "")
    each = f"each `{call}`" if call else "each call"
    avoidable = sum(c.need == AVOIDABLE for c in compiles)
    split = f" ({avoidable} of {stats.compiles} avoidable)" if avoidable else ""
    return (
        f"{library} builds a new jit wrapper for {each}: each call compiles once{split}; "
        "it is not in your code"
    )


def _library_made(compiles: list[Compile]) -> Compile | None:
    """The last compile of a jit that a library made from the user's call, or None."""
    made = [c for c in compiles if c.called_from and _package(c.created_at or "")]
    return made[-1] if made else None


def _library_batches(compiles: list[Compile]) -> bool:
    """Whether a library's jit saw the first dimension of its argument shrink (32, then
    4: keras's `model.predict` of 100 samples in batches of 32, its last batch short)."""
    if _library_made(compiles) is None:
        return False
    shapes = _shapes(_commonest_arg("shape", compiles), compiles)
    if len({len(s) for s in shapes}) != 1 or not shapes or not shapes[0]:
        return False
    varying = [d for d in range(len(shapes[0])) if len({s[d] for s in shapes}) > 1]
    return varying == [0] and min(s[0] for s in shapes[1:]) < shapes[0][0]


def _library_shape_fix(compiles: list[Compile]) -> str:
    """A library's jit whose shapes come from the data the user's call gave it: its
    last batch shorter (keras), or data of another size (numpyro's `mcmc.run`)."""
    made = _library_made(compiles)
    call = _called_expression(made.called_from or "") if made else ""
    library = _package(made.created_at or "") if made else ""
    given = f"your `{call}`" if call else "your call"
    if _library_batches(compiles):
        return (
            f"{library} cut the data {given} gave it into batches, the last one shorter: a "
            "batch size that divides the data's length, or the data padded to a multiple of "
            "it, keeps one shape"
        )
    return (
        f"{library}'s jit takes its shapes from the data {given} gave it: each new size "
        "compiles once (a few sizes, the data padded to them, compile a few times)"
    )


def _package(location: str) -> str:
    """'numpyro' for '/…/site-packages/numpyro/util.py:416', '' outside installed packages."""
    inside = installed_parts(location.rpartition(":")[0])
    return inside[0] if len(inside) > 1 else ""  # a package's folder, not a lone module


def _called_expression(location: str) -> str:
    """'mcmc.run' for the user's line 'mcmc.run(key, X, y)' at `location`, or '': the
    first call that is not of a builtin ('print(model.predict(x))': `model.predict`)."""
    path, _, line = location.rpartition(":")
    text = linecache.getline(path, int(line)) if line.isdigit() else ""
    called = re.findall(r"([A-Za-z_][\w.]*)\s*\(", text)
    return next((name for name in called if not hasattr(builtins, name)), "")


def _loop_fix(reads: Locals | None, loop: str, compiles: list[Compile]) -> str:
    """A function under a lax loop, made anew on each call of the function around it:
    defined once there, or, where it reads that function's locals, jitted with it (or
    given them through the loop's carry)."""
    if reads is None:
        outer = next((_enclosing(c) for c in compiles if _enclosing(c)), "")
        where = f"outside `{outer}`" if outer else "once"
        return f"define it {where} and pass the same function each time"
    through = "as operands" if loop == "lax.cond" else "in the loop's carry"
    if reads.all_called:  # functions: no carry holds them
        return (
            f"{reads.reads}, {'a function' if len(reads.names) == 1 else 'functions'} it "
            f"calls, which cannot go {through}: jit `{reads.outer}` itself, with "
            f"{reads.listed} static (static_argnames)"
        )
    return (
        f"{reads.reads}: jit `{reads.outer}` itself, or define the function once, outside "
        f"`{reads.outer}`, and pass {reads.listed} {through}"
    )


def _new_object_text(
    arg: str,
    ours: list[Reason],
    stats: FunctionStats,
    compiles: list[Compile],
    cwd: str | tuple[str, ...],
) -> str:
    """'`terms.vector_field`: a new function `solve.<locals>.<lambda>` (model.py:4) on every
    call → define it once, outside `solve`': a static value made anew for each call; where
    that function reads its maker's locals, how to give them to it."""
    often = (
        "on every call" if len(ours) >= stats.compiles - 1 else f"on {plural(len(ours), 'call')}"
    )
    outer = outer_function(ours[-1].after)
    reads = _function_locals(ours[-1].after, cwd)
    if reads is not None:  # moved out alone, it would not see them
        static = any(arg in c.static for c in compiles)
        fix = (
            f"{reads.reads}: define it once, outside `{reads.outer}`, taking "
            f"{reads.as_arguments}, and pass jax.tree_util.Partial(f, {reads.bare}), which jit "
            "compares by its values, not its identity"
            + (" (a dynamic argument, not static)" if static else "")
        )
    elif outer:
        fix = f"define it once, outside `{outer}`"
    else:
        fix = "make it once and pass the same object on every call"
    return f"`{arg}`: {ours[-1].after} {often} → {fix}"


def _function_locals(words: str, cwd: str | tuple[str, ...]) -> Locals | None:
    """What the function a value's words name ('a new function `solve.<locals>.<lambda>`
    (model.py:4)') reads of its maker's locals; None: none, or not found."""
    found = FUNCTION_WORDS.search(words)
    place = located(found.group(2), cwd) if found else ""
    return read_locals(place, found.group(1)) if found and place else None


def _cache_text(reasons: list[Reason], stats: FunctionStats) -> str:
    """A recompile with nothing different: the cache was cleared (seen), or not found."""
    cleared = [r for r in reasons if r.after.startswith(CLEARED)]
    if cleared:
        return (
            f"compiled again after {cleared[-1].after.replace(' emptied it', '')} emptied the cache"
        )
    return (
        f"{plural(len(reasons), 'recompile')} with no difference found in the function, its "
        "arguments or jax.jit's settings"
    )


def _new_jit_text(stats: FunctionStats, compiles: list[Compile], cwd: str) -> str:
    """'a new jit(jacfwd(partial(safe_norm))) is made on each call at test.py:110'; a
    function under a lax loop: 'a new `<lambda>` runs under lax.scan on each call of
    `accumulate`'."""
    loop = next((c for c in compiles if c.wraps and c.wraps[0] in LOOP_LAYERS), None)
    if loop is not None:
        outer = _enclosing(loop)
        of = f" of `{outer}`" if outer else ""
        return f"a new `{stats.name}` runs under {loop.wraps[0]} on each call{of}"
    made = Counter(
        (tuple(c.wraps), c.created_at or stats.defined_at)
        for c in compiles
        if any(r.kind == "new_function" and r.before != FIRST_COMPILE for r in c.reasons)
    )
    layers, where = made.most_common(1)[0][0] if made else ((), stats.defined_at)
    return f"a new {jitted(layers, stats.name)} is made on each call at {short_path(where, cwd)}"


def _enclosing(compile: Compile) -> str:
    """The user's function whose line made the loop's function ('accumulate'), or ''."""
    file = compile.defined_at.rpartition(":")[0]
    for frame in reversed(compile.stack):
        location, _, function = frame.partition(" in ")
        if location.rpartition(":")[0] == file and function not in ("<module>", "<lambda>"):
            return function
    return ""


def _commonest_arg(kind: str, compiles: list[Compile]) -> str:
    """The argument that the reasons of this kind name most often ('?' for none)."""
    args = Counter(r.arg for c in compiles for r in c.reasons if r.kind == kind)
    return args.most_common(1)[0][0] if args else "?"


def _shapes(arg: str, compiles: list[Compile]) -> list[tuple[int, ...]]:
    """The shapes `arg` took, in order of first appearance."""
    return _distinct(
        tuple(leaf.shape or ()) for c in compiles for leaf in c.signature if leaf.arg == arg
    )


def _rank_changed(compiles: list[Compile]) -> bool:
    """Whether the argument whose shape changed most often took more than one rank."""
    return len({len(s) for s in _shapes(_commonest_arg("shape", compiles), compiles)}) > 1


def _shape_text(arg: str, compiles: list[Compile]) -> str:
    shapes = _shapes(arg, compiles)
    if len({len(s) for s in shapes}) == 1 and shapes:
        varying = [d for d in range(len(shapes[0])) if len({s[d] for s in shapes}) > 1]
        if len(varying) == 1:
            dim = varying[0]
            sizes = _distinct(s[dim] for s in shapes)
            return f"{arg} dim {dim} took {len(sizes)} values ({_list(sizes)})"
    texts = ["[" + ",".join(map(str, s)) + "]" for s in shapes]
    return f"{arg} took {len(shapes)} shapes ({_list(texts)})"


def _distinct(values: object) -> list:
    return list(dict.fromkeys(v for v in values if v is not None))  # type: ignore[attr-defined]


def _list(values: list, most: int = 6) -> str:
    shown = ", ".join(str(v) for v in values[:most])
    return shown + (", …" if len(values) > most else "")


def outer_function(text: str) -> str | None:
    """'solve' for a function's words (`viz.recorder.capture.values` writes them) naming
    `solve.<locals>.<lambda>`, the function that makes a new one on each call; None for a
    function defined once."""
    match = re.search(r"function `(\S+)\.<locals>\.[^`]+`", text)
    return match.group(1).split(".<locals>.")[-1].rsplit(".", 1)[-1] if match else None
