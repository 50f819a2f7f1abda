"""viz.hlo_dump: the optimized HLO XLA dumps while it generates code (issue #20)."""

from __future__ import annotations

import os
import re
import threading
import time
from pathlib import Path

import jax
import jax.numpy as jnp

from viz.hlo_dump import OptimizedHloDump, written_whole

_CONFIG = re.compile(r", backend_config=.*")  # to the end of its line


def same_program(dump: str, text: str) -> bool:
    """Whether the dump says what the executable's `as_text()` says, to the graph reader:
    the same text up to each line's `backend_config` (JSON XLA printed twice, its keys
    in another order: the same length), which the reader never reads."""
    if dump == text:
        return True
    return len(dump) == len(text) and _CONFIG.sub("", dump) == _CONFIG.sub("", text)


MODULE = """HloModule jit_f, entry_computation_layout={(f32[4]{0})->f32[4]{0}}

%fused (p: f32[4]) -> f32[4] {
  %p = f32[4]{0} parameter(0)
  ROOT %s = f32[4]{0} sine(%p)
}

ENTRY %main (x: f32[4]) -> f32[4] {
  %x = f32[4]{0} parameter(0)
  ROOT %f = f32[4]{0} fusion(%x), kind=kLoop, calls=%fused, backend_config={"a":1,"b":2}
}
"""


def test_a_module_is_whole_once_its_entry_computation_is_closed():
    assert written_whole(MODULE)
    cut = MODULE[: MODULE.index("ROOT %f")]
    assert not written_whole(cut)
    assert not written_whole(MODULE[: MODULE.index("ENTRY")])  # the entry comes last


def test_the_dump_is_the_same_program_up_to_its_backend_config_key_order():
    reordered = MODULE.replace('{"a":1,"b":2}', '{"b":2,"a":1}')
    assert same_program(reordered, MODULE)
    assert not same_program(MODULE.replace("sine", "cosine"), MODULE)
    assert not same_program(MODULE.replace("sine", "tanh"), MODULE)  # the same length
    assert not same_program(reordered.replace("%p", "%q"), MODULE)
    assert not same_program(MODULE + "\n%extra\n", MODULE)


def test_a_user_who_dumps_keeps_their_dump():
    for options, environ in (
        ({"xla_dump_to": "/tmp/theirs"}, {}),
        ({}, {"XLA_FLAGS": "--xla_dump_to=/tmp/theirs --xla_dump_hlo_as_text"}),
    ):
        dump = OptimizedHloDump(options, environ)
        assert dump.options == {} and dump.folder is None
        dump.done()
        assert dump.wait() is None
        dump.close()


def test_the_dump_is_what_the_executable_says_and_is_removed_after():
    dump = OptimizedHloDump({}, {})
    lowered = jax.jit(lambda x: jnp.sin(x) * 2.0).lower(jnp.ones(8))
    waited: list[str | None] = []
    reader = threading.Thread(target=lambda: waited.append(dump.wait()))
    reader.start()
    compiled = lowered.compile(dump.options)
    dump.done()
    reader.join(timeout=30)
    assert waited[0] is not None and same_program(waited[0], compiled.as_text())
    folder = Path(dump.folder)
    dump.close()
    assert not folder.exists()


def test_waiting_ends_when_the_compile_ends_without_a_dump():
    dump = OptimizedHloDump({}, {})
    threading.Timer(0.05, dump.done).start()
    start = time.perf_counter()
    assert dump.wait() is None
    assert time.perf_counter() - start < 5
    dump.close()


def test_the_folders_of_processes_that_died_while_compiling_are_removed():
    import subprocess
    import sys
    import tempfile

    from viz import hlo_dump

    said = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], stdout=-1)
    dead = Path(tempfile.mkdtemp(prefix=f"{hlo_dump._PREFIX}{int(said.stdout)}-"))
    mine = Path(tempfile.mkdtemp(prefix=f"{hlo_dump._PREFIX}{os.getpid()}-"))
    hlo_dump._remove_orphans.__wrapped__()
    assert not dead.exists() and mine.exists()
    mine.rmdir()


def sort_and_cumsum(x):
    return jnp.cumsum(jnp.sort(x, axis=-1), axis=0)


def test_the_dumps_hlo_proto_gives_the_profile_the_memory_analysis_gives():
    """The TPU's path (its `memory_analysis()` holds no buffer assignment), forced on
    the CPU: XLA's dump of the compile, read before the folder goes, gives the same
    profile as the assignment the analysis holds."""
    from viz.memory.profile import executable_profile, hlo_proto_profile

    dump = OptimizedHloDump({}, environ={}, proto=True)
    try:
        lowered = jax.jit(sort_and_cumsum).lower(jax.ShapeDtypeStruct((512, 256), jnp.float32))
        compiled = lowered.compile(compiler_options=dump.options)
        dumped = dump.hlo_proto()
    finally:
        dump.close()
    assert dumped and not os.path.exists(dump.folder)
    executable = compiled.runtime_executable()
    from_analysis = executable_profile(executable, compiled.memory_analysis())
    from_dump = hlo_proto_profile(dumped)
    assert from_dump.peak_bytes == from_analysis.peak_bytes > 512 * 256 * 4
    assert from_dump.at_peak == from_analysis.at_peak
    assert from_dump.timeline == from_analysis.timeline

    class NoAssignment:  # a TPU's analysis
        serialized_buffer_assignment_proto = b""

    fallback = executable_profile(executable, NoAssignment(), dumped)
    assert fallback.peak_bytes == from_analysis.peak_bytes


def test_a_dump_asked_for_its_proto_keeps_the_buffer_assignment_whole():
    proto = OptimizedHloDump({}, environ={}, proto=True)
    text = OptimizedHloDump({}, environ={})
    try:
        assert proto.options["xla_dump_hlo_as_proto"] is True
        assert "xla_dump_buffer_assignment_analysis" not in proto.options
        assert proto.hlo_proto() is None  # nothing compiled yet
        assert text.hlo_proto() is None  # not asked for
    finally:
        proto.close()
        text.close()
