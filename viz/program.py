"""The program a user works on: its `Settings` (the code or the built-in sample it
came from, the function, its args spec, static and donated arguments, compiler
options, mesh) and the sample's lesson hints. Explore, the cache lab and the lessons
share one; a link, the History page and a recording each open one. Plain data: no
jax, no streamlit."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from viz.samples import Sample
from viz.settings import Settings
from viz.source import list_functions


@dataclass
class Program:
    settings: Settings  # the device is the page's: `analysis` sets it
    extra: dict[str, Any] = field(default_factory=dict)  # the sample's lesson hints
    origin: str = ""  # where the code came from, when a recording opened it

    @classmethod
    def from_sample(cls, sample: Sample) -> Program:
        settings = Settings(
            code=sample.code,
            sample=sample.name,
            function=sample.function,
            args=sample.args,
            static=list(sample.static),
        )
        return cls(settings, extra=dict(sample.extra))

    def edit(self, code: str) -> None:
        """The user changed the code: it is no longer the sample's (nor the file's); the
        sample's lesson hints stay, as long as the functions they name do."""
        if code != self.settings.code:
            self.settings = replace(self.settings, code=code, sample=None)
            self.origin = ""

    def hint(self, name: str) -> Any:
        """A lesson hint of the sample (INNER, LOOP_STEP, BATCH_ARG), None if absent."""
        return self.extra.get(name)

    def settings_on(self, device: str) -> Settings:
        """Its settings on the page's `device` (an `Analyze` of this program carries
        them whole)."""
        return replace(self.settings, device=device)


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
