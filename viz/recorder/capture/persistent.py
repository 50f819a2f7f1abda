"""The persistent compilation cache, explained: hit or miss, stored or not, and why.

JAX explains only tracing-cache misses; for its persistent cache (`jax_compilation_cache_dir`)
it says hit or miss, and logs the key's component hashes at DEBUG level. Here each
compile that looked in the cache gets its key's components, read the way
`jax._src.cache_key.get` builds the key (one hash per component, in its order, the
cumulative one being the key):

- `computation`: the module with its debug info stripped (a hash);
- `jaxlib`: the version; `backend`: platform and platform version;
- `xla_flags`: the flags in XLA_FLAGS, LIBTPU_INIT_ARGS and the command line, less
  those JAX leaves out of the key;
- `compile_options` and `devices`: hashes; `compression`: the algorithm; `hook`: the
  custom hook's string.

A miss is compared with the nearest earlier compile of the same function and
signature that used the same cache folder: in this run, or in earlier runs, found in
an index of keys per cache folder under `$JITSCOPE_HOME/persistent/` (appended as
compiles happen). Nearest: fewest differing components, then the latest. The cost
(one more serialization of the module per compile) is paid only while the persistent
cache is in use.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from viz.locations import home
from viz.recorder.model import KeyChange, Persistent, change_text

COMPONENTS = (
    "computation",
    "jaxlib",
    "backend",
    "xla_flags",
    "compile_options",
    "devices",
    "compression",
    "hook",
)
HASH_CHARS = 16  # of a component's sha256 shown where its value is not readable


def key_components(context: Any) -> tuple[str, dict[str, str]]:
    """(JAX's cache key, {component: readable value or hash}) for one compile."""
    from jaxlib.mlir import ir

    from viz.jax_private import cache_key_hashers, cache_key_hook, compression, jaxlib_version

    hashers = cache_key_hashers(context)
    backend = context.backend
    flags = xla_flags()
    readable = {
        "jaxlib": jaxlib_version(),
        "backend": f"{backend.platform} {backend.platform_version}",
        "xla_flags": " ".join(flags) or "(none)",
        "compression": compression(),
        "hook": cache_key_hook() or "(none)",
    }
    total = hashlib.sha256()
    components = {}
    for name in COMPONENTS:
        hashers[name](total)
        if name not in readable:
            own = hashlib.sha256()
            hashers[name](own)
            readable[name] = own.hexdigest()[:HASH_CHARS]
        components[name] = readable[name]
    module = context.computation
    module_name = ir.StringAttr(module.operation.attributes["sym_name"]).value
    return f"{module_name}-{total.hexdigest()}", components


def xla_flags() -> list[str]:
    """The XLA flags JAX puts into the key, as `cache_key._hash_xla_flags` finds them."""
    from viz.jax_private import xla_flag_rules

    found = []
    for variable in ("XLA_FLAGS", "LIBTPU_INIT_ARGS"):
        found += (os.getenv(variable) or "").split()
    prefixes, excluded = xla_flag_rules()
    found += [
        a for a in sys.argv if a.startswith("--xla") or any(a.startswith(p) for p in prefixes)
    ]
    return [f for f in sorted(found) if f.split("=")[0] not in excluded]


def cache_dir() -> str:
    import jax

    return str(jax.config.jax_compilation_cache_dir or "")


def written(key: str) -> bool | None:
    """Whether the cache folder now holds `key` (None: a cache that is not a folder)."""
    from viz.jax_private import compilation_cache_folder

    folder = compilation_cache_folder()
    if folder is None:
        return None
    return (Path(folder) / f"{key}-cache").exists()


def why_not_written(context: Any, compile_s: float) -> str:
    """JAX's reasons for not storing an entry (`compiler._cache_write`), first that applies."""
    import jax

    process = jax.process_index()
    if process != 0:
        return f"only process 0 writes the cache; this is process {process}"
    if context.host_callbacks:
        return "it uses host callbacks (jax.debug.print, io_callback, …), which JAX never stores"
    least = jax.config.jax_persistent_cache_min_compile_time_secs
    if compile_s < least:
        return (
            f"compiling took {compile_s:.2f} s, under jax_persistent_cache_min_compile_time_secs "
            f"= {least:g} s"
        )
    least_bytes = jax.config.jax_persistent_cache_min_entry_size_bytes
    return f"the entry was smaller than jax_persistent_cache_min_entry_size_bytes = {least_bytes}"


@dataclass
class Entry:
    """One earlier compile that used the cache folder, as the index keeps it."""

    match: str  # function, file and signature
    key: str
    components: dict[str, str]
    compile_s: float
    written: bool


class KeyIndex:
    """Earlier compiles per cache folder: `$JITSCOPE_HOME/persistent/<folder hash>.jsonl`,
    read once per folder and appended as compiles happen (a line per compile)."""

    def __init__(self) -> None:
        self._entries: dict[str, list[Entry]] = {}
        self._lock = threading.Lock()

    def _path(self, folder: str) -> Path:
        digest = hashlib.sha1(os.path.realpath(folder).encode()).hexdigest()[:16]
        return home() / "persistent" / f"{digest}.jsonl"

    def entries(self, folder: str) -> list[Entry]:
        with self._lock:
            if folder not in self._entries:
                self._entries[folder] = _read(self._path(folder))
            return self._entries[folder]

    def add(self, folder: str, entry: Entry) -> None:
        self.entries(folder)
        with self._lock:
            self._entries[folder].append(entry)
            try:
                path = self._path(folder)
                path.parent.mkdir(parents=True, exist_ok=True)
                with path.open("a", encoding="utf-8") as out:
                    out.write(json.dumps(entry.__dict__) + "\n")
            except OSError:
                pass  # the index is a help, never a reason to fail the program


def _read(path: Path) -> list[Entry]:
    entries = []
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return []
    for line in lines:
        try:
            entries.append(Entry(**json.loads(line)))
        except (ValueError, TypeError):
            continue  # a torn or foreign line
    return entries


def nearest(entries: list[Entry], match: str, components: dict[str, str]) -> Entry | None:
    """The earlier compile of the same function and signature with the fewest differing
    components; the latest of those."""
    same = [e for e in entries if e.match == match]
    if not same:
        return None
    return min(reversed(same), key=lambda e: len(changes(e.components, components)))


def changes(before: dict[str, str], after: dict[str, str]) -> list[KeyChange]:
    return [
        KeyChange(name, before.get(name, "?"), after.get(name, "?"))
        for name in COMPONENTS
        if before.get(name) != after.get(name)
    ]


def explain(
    state: str,
    key: str,
    components: dict[str, str],
    earlier: Entry | None,
    stored: bool,
    not_stored: str,
    folder: str,
    jax_saved_s: float | None,
    compile_s: float,
) -> Persistent:
    """The `persistent` record of one compile that looked in the cache."""
    if state == "hit":
        saved = earlier.compile_s - compile_s if earlier and earlier.key == key else jax_saved_s
        return Persistent(
            "hit", False, "served from disk", key, [], components, folder, max(saved or 0.0, 0.0)
        )
    changed = changes(earlier.components, components) if earlier else []
    if earlier is None:
        why = "the first compile of this function and signature with this cache folder"
    elif not changed:
        why = (
            "the same key compiled before but was not stored"
            if not earlier.written
            else "the same key was stored before and is gone (evicted or deleted)"
        )
    else:
        why = "key changed: " + ", ".join(change_text(c) for c in changed)
    if not stored:
        why += f"; not stored: {not_stored}"
    return Persistent("miss", stored, why, key, changed, components, folder)
