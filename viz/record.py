"""`Record`: the base of the plain-data dataclasses that cross a boundary (worker →
app, report → JSON). A record converts to and from its JSON (`to_dict`,
`from_dict`) and can be read like it (`record["key"]`, `record.get("key")`)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import asdict, fields
from typing import Any


class Record(Mapping[str, Any]):
    """Mix into a dataclass: a read-only mapping over its fields."""

    def __getitem__(self, key: str) -> Any:
        if key not in self.__dataclass_fields__:  # type: ignore[attr-defined]
            raise KeyError(key)
        return getattr(self, key)

    def __iter__(self) -> Iterator[str]:
        return iter(self.__dataclass_fields__)  # type: ignore[attr-defined]

    def __len__(self) -> int:
        return len(self.__dataclass_fields__)  # type: ignore[attr-defined]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)  # type: ignore[call-overload]

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> Any:
        if data is None:
            return None
        known = {f.name for f in fields(cls)}  # type: ignore[arg-type]
        return cls(**{k: v for k, v in data.items() if k in known})
