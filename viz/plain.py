"""`Plain`: the base of the plain-data dataclasses that cross a boundary (worker →
app, report → JSON, history → page). A plain dataclass converts to its JSON
(`to_dict`) and back (`from_dict`), nested plain fields included, decoded by their
type hints: `list[Kernel]`, `dict[str, GraphSummary]`, `ErrorInfo | None`. Its
fields can also be read by name (`section["key"]`), which tests and scripts use."""

from __future__ import annotations

import functools
import threading
import types
import typing
from collections.abc import Callable, Iterator, Mapping
from dataclasses import fields, is_dataclass
from typing import Any

FLAT = "jitscope.flat"  # a field's metadata key: the keys its flat JSON leaves out


def flat(omit: tuple[str, ...] = ()) -> dict[str, frozenset[str]]:
    """The metadata of a nested plain field whose JSON keys are its parent's own
    (`field(default_factory=Settings, metadata=flat())`); `omit`: its keys the
    parent's format never holds."""
    return {FLAT: frozenset(omit)}


class Later:
    """A field's value still to come (`Arriving`): `make()` makes it, once, where it is
    first read. On the page, a part of a report the worker sends after its head,
    decoded (`arrived`); in the worker, what the head does not wait for (XLA's analyses
    of the executable), made as its part is sent."""

    def __init__(self, make: Callable[[], Any]):
        self._make = make
        self._lock = threading.Lock()
        self._value: Any = Later  # not made yet

    @classmethod
    def arrived(
        cls, text: Callable[[], str | None], decode: Callable[[str], Any], missing: Any
    ) -> Later:
        """The value decoded from `text()` once it is in (`missing`: it never came)."""

        def make() -> Any:
            found = text()
            return missing if found is None else decode(found)

        return cls(make)

    def value(self) -> Any:
        with self._lock:
            if self._value is Later:
                self._value = self._make()
            return self._value


def pending(holder: Any, name: str) -> bool:
    """Whether `holder.name` is a `Later` not read yet (reading it would wait for it)."""
    return type(object.__getattribute__(holder, name)) is Later


class Arriving:
    """Mix into a plain dataclass some of whose fields may arrive after it (a report
    from the worker: `viz.worker.parts`): such a field holds a `Later`, and reading it
    waits for its value, which then takes its place. Every reader sees a whole value."""

    def __getattribute__(self, name: str) -> Any:
        value = object.__getattribute__(self, name)
        if type(value) is Later:
            value = value.value()
            object.__setattr__(self, name, value)  # a frozen dataclass too: it is its value
        return value


class Plain(Mapping[str, Any]):
    """Mix into a dataclass: JSON both ways, and a read-only mapping over its fields."""

    def __getitem__(self, key: str) -> Any:
        if key in _names(type(self)):
            return getattr(self, key)
        for name in _flat_fields(type(self)):  # a flat field's keys are its parent's own
            inner = getattr(self, name)
            if key in wire_names(type(inner)):
                return inner[key]
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return iter(_names(type(self)))

    def __len__(self) -> int:
        return len(_names(type(self)))

    def to_dict(self) -> dict[str, Any]:
        """Its JSON: fields by name, nested plain values converted (no deep copies:
        `dataclasses.asdict` copies every leaf, which costs seconds on a large report).
        A field whose type hint says it is JSON already (`str`, `list[int]`,
        `dict[str, int]`) is taken as it is: a report holds thousands of such rows."""
        data = {}
        for name, as_is, omit in _fields_as_is(type(self)):
            value = getattr(self, name)
            if omit is not None:  # a flat field: its keys are this JSON's own
                data.update((k, v) for k, v in value.to_dict().items() if k not in omit)
            else:
                data[name] = value if as_is else encode(value)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> Any:
        """The dataclass from its JSON; keys it does not know are ignored, missing ones
        take their defaults."""
        if data is None:
            return None
        decoders = _decoders(cls)
        values = {k: decoders[k](v) for k, v in data.items() if k in decoders}
        for name, omit in _flat_fields(cls).items():
            kind = _hints(cls)[name]
            mine = set(_names(kind)) - omit
            values[name] = kind.from_dict({k: v for k, v in data.items() if k in mine})
        return cls(**values)


@functools.cache
def _names(cls: type) -> tuple[str, ...]:
    """The dataclass's fields (not its ClassVars, which `__dataclass_fields__` holds too)."""
    return tuple(f.name for f in fields(cls))


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


_ATOMS = (str, int, float, bool, type(None))


@functools.cache
def _fields_as_is(cls: type) -> tuple[tuple[str, bool, frozenset[str] | None], ...]:
    """(name, whether its value is JSON as it is, the keys a flat field leaves out or
    None for a field that is not flat) for each field of `cls`."""
    hints, nested = _hints(cls), _flat_fields(cls)
    return tuple((n, _json_as_is(hints[n]), nested.get(n)) for n in _names(cls))


@functools.cache
def wire_names(cls: type) -> frozenset[str]:
    """The keys of its JSON: its fields, a flat field's own keys in place of its name."""
    nested = _flat_fields(cls)
    names = {n for n in _names(cls) if n not in nested}
    for name, omit in nested.items():
        names |= set(wire_names(_hints(cls)[name])) - omit
    return frozenset(names)


@functools.cache
def _decoders(cls: type) -> dict[str, Callable[[Any], Any]]:
    """How each field (not a flat one) is read from its JSON: a field whose JSON is its
    value already (`_json_as_is`: a fusion map's thousands of rows of ids and names) is
    taken as it is, its container checked; the rest is decoded by its hint."""
    hints, nested = _hints(cls), _flat_fields(cls)
    return {n: _decoder(hints[n]) for n in _names(cls) if n not in nested}


def _decoder(hint: Any) -> Callable[[Any], Any]:
    if not _json_as_is(hint):
        return functools.partial(decode, hint)
    kind = typing.get_origin(hint)
    if kind not in (list, dict):
        return _as_is

    def checked(value: Any) -> Any:
        if value is not None:
            _expect(value, kind, hint)
        return value

    return checked


def _as_is(value: Any) -> Any:
    return value


@functools.cache
def _flat_fields(cls: type) -> dict[str, frozenset[str]]:
    """The flat fields of `cls`, each with the keys its JSON leaves out."""
    return {f.name: f.metadata[FLAT] for f in fields(cls) if FLAT in f.metadata}


def _json_as_is(hint: Any) -> bool:
    """Whether every value of type `hint` is JSON data that `encode` would rebuild
    unchanged: atoms, and lists of them and str-keyed dicts of them (not tuples,
    which `encode` keeps as tuples, nor `Any`)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return all(_json_as_is(a) for a in args)
    if origin is list:
        return len(args) == 1 and _json_as_is(args[0])
    if origin is dict:
        return len(args) == 2 and args[0] is str and _json_as_is(args[1])
    return hint in _ATOMS


def decode(hint: Any, value: Any) -> Any:
    """`value` (JSON) as the type `hint` names: plain dataclasses and anything with a
    `from_dict` are built, lists and dicts decoded item by item, the rest kept.
    TypeError when a structure is not what the hint says (a list where a record goes)."""
    if value is None:
        return None
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        return decode(inner[0], value) if len(inner) == 1 else value
    if origin is list:
        _expect(value, list, hint)
        return [decode(args[0], v) for v in value] if args else value
    if origin is dict:
        _expect(value, dict, hint)
        return {k: decode(args[1], v) for k, v in value.items()} if len(args) == 2 else value
    if isinstance(hint, type) and hasattr(hint, "from_dict"):
        _expect(value, dict, hint)
        return hint.from_dict(value)
    return value


def _expect(value: Any, kind: type, hint: Any) -> None:
    if not isinstance(value, kind):
        raise TypeError(f"expected {hint}, got {type(value).__name__}")


def encode(value: Any) -> Any:
    """JSON data from plain dataclasses (`to_dict`), and lists, tuples and dicts of
    them; other values as they are."""
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    if isinstance(value, list):
        return [encode(v) for v in value]
    if isinstance(value, tuple):  # as dataclasses.asdict keeps them (JSON writes a list)
        return tuple(encode(v) for v in value)
    if isinstance(value, dict):
        return {k: encode(v) for k, v in value.items()}
    if isinstance(value, type):
        return value
    if is_dataclass(value) and hasattr(value, "to_dict"):
        return value.to_dict()
    if is_dataclass(value):
        return {f.name: encode(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, Mapping):  # a mapping of its own kind (a report's Graphs)
        return {k: encode(v) for k, v in value.items()}
    return value
