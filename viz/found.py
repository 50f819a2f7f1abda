"""`Found`: what a reader found, or the warning that says why it found nothing. Its own
small module: the readers in the packages (`viz.compile_profile`, `viz.fusion`) return
one without importing the report's sections. No jax."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Found(Generic[T]):
    """What a reader found, or the warning that says why it found nothing (a reader
    bug must not hide the other results); a value may come with a warning too."""

    value: T | None = None
    warning: str = ""

    @classmethod
    def failed(cls, what: str, exc: BaseException) -> Found[T]:
        """`what` failed with `exc`: its warning, `{what}: {exception}`."""
        return cls(warning=f"{what}: {type(exc).__name__}: {exc}")
