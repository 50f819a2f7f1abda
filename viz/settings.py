"""`Settings`: what is analysed and how, as one value. The code (or the built-in sample
it is), the folder its imports live in, the file it came from, the function, its args
spec, the static and donated arguments, the device, 64-bit mode, XLA's compiler options,
the mesh the spec's `@ P(...)` split over, and the memory limit for running it.

A `Program` holds one, and so does every worker request that runs code, a history
`Run`, a diff side and a share link; `viz.target.Target.from_settings` turns one into
the loaded function the stages compile. Plain data: no jax."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from viz.plain import Plain


@dataclass
class Settings(Plain):
    code: str = ""  # the program's source text
    sample: str | None = None  # the built-in sample whose code this is (demo mode reads it)
    folder: str | None = None  # the code's folder, put on sys.path for its sibling imports
    file: str | None = None  # the code's file as the user named it; None: the app's editor
    function: str | None = None  # None: the code's one function
    args: str = ""  # the args spec (viz.spec)
    static: list[str] = field(default_factory=list)  # as static_argnames / static_argnums
    donate: list[str] = field(default_factory=list)  # as donate_argnames / donate_argnums
    device: str = "cpu"  # cpu, cpu:8, gpu, tpu: a DeviceConfig's text (viz.platforms)
    x64: bool | None = None  # None: on exactly when the spec uses a 64-bit dtype
    compiler_options: dict[str, Any] = field(default_factory=dict)  # as passed to XLA
    mesh: str = ""  # `data=4, model=2`: the device mesh `@ P(...)` splits over
    memory_limit_bytes: int | None = None  # None: the worker's own limit

    def function_only(self) -> Settings:
        """These settings' function alone: its code (or sample), folder, name, static
        arguments and device; no args spec, nor how to compile it. The cache lab keeps
        one live jitted function for each, and calls it with args of its own."""
        return Settings(
            code=self.code,
            sample=self.sample,
            folder=self.folder,
            file=self.file,
            function=self.function,
            static=list(self.static),
            device=self.device,
        )
