"""The program a user works on: the code (or the built-in sample it came from), the
function, its args spec, static and donated arguments, compiler options. Explore,
the cache lab and the lessons share one; a link, the History page and a recording
each open one. Plain data: no jax, no streamlit."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from viz.samples import Sample
from viz.source import list_functions
from viz.worker.protocol import Analyze


@dataclass
class Program:
    code: str
    function: str
    args: str = ""
    static: list[str] = field(default_factory=list)
    donate: list[str] = field(default_factory=list)
    compiler_options: dict[str, Any] = field(default_factory=dict)
    sample: str | None = None  # the built-in sample whose code this is
    extra: dict[str, Any] = field(default_factory=dict)  # the sample's lesson hints
    origin: str = ""  # where the code came from, when a recording opened it
    folder: str | None = None  # the file's folder (a recorded program), for its imports
    mesh: str = ""  # `data=4, model=2`: the device mesh its `@ P(...)` specs split over

    @classmethod
    def from_sample(cls, sample: Sample) -> Program:
        return cls(
            code=sample.code,
            function=sample.function,
            args=sample.args,
            static=list(sample.static),
            sample=sample.name,
            extra=dict(sample.extra),
        )

    def edit(self, code: str) -> None:
        """The user changed the code: it is no longer the sample's (nor the file's); the
        sample's lesson hints stay, as long as the functions they name do."""
        if code != self.code:
            self.code, self.sample, self.origin = code, None, ""

    def hint(self, name: str) -> Any:
        """A lesson hint of the sample (INNER, LOOP_STEP, BATCH_ARG), None if absent."""
        return self.extra.get(name)

    def analysis(self, device: str, runs: int) -> Analyze:
        """The request that analyzes this program."""
        return Analyze(
            code=self.code,
            function=self.function,
            args=self.args,
            static=list(self.static),
            donate=list(self.donate),
            compiler_options=dict(self.compiler_options),
            device=device,
            runs=runs,
            sample=self.sample,
            folder=self.folder,
            mesh=self.mesh,
        )


def spec_rows(code: str, function: str | None, args: str) -> list[tuple[str, str]]:
    """(parameter, spec item) for each parameter of `function` in `code` (extra items
    get arg0, arg1, … names)."""
    from viz.spec import split_spec  # numpy and ml_dtypes: after app.py has started the worker

    info = next((f for f in list_functions(code) if f.name == function), None)
    items = split_spec(args)
    params = list(info.params) if info else [f"arg{i}" for i in range(len(items))]
    params += [f"arg{i}" for i in range(len(params), len(items))]
    return [(p, items[i] if i < len(items) else "") for i, p in enumerate(params)]


def join_spec(items: list[str]) -> str:
    """Rows back into one spec; trailing empty rows are parameters left at their default."""
    while items and not items[-1].strip():
        items = items[:-1]
    return ", ".join(item.strip() for item in items)
