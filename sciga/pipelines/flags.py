"""Command-line flags declared once: as fields of a frozen dataclass that carry the flag's
name, help and argparse settings (``flag(...)``). From such a class come both the argparse
arguments (``add_flags``) and, from a parsed command line, an instance of the class
(``from_args``): the typed flags a command turns into its options.

    @dataclass(frozen=True)
    class VisionFlags:
        GROUP: ClassVar[str] = "vision (images, medical filter, graphical abstracts)"

        max_image_pixels: int = flag(
            "--max-image-pixels", DEFAULT_MAX_PIXELS, type=positive_int, help="... (default: %(default)s)"
        )

The field's name is the argparse ``dest`` (and the key under which the build records the
option in its manifest); its default is the flag's. A field whose value is itself a flags
class (``flags_of(VisionFlags)``) adds that class's flags, in a group named by its ``GROUP``.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable, Iterator
from dataclasses import MISSING, dataclass
from typing import Any, Optional, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Flag:
    """argparse's settings of one flag (``add_argument``'s keyword arguments)."""

    names: tuple[str, ...]
    help: str | Callable[[], str]  # a function: help made when the parser is (it names this machine's cores)
    type: Optional[Callable[[str], Any]] = None
    metavar: Optional[str] = None
    choices: Optional[tuple] = None
    action: Optional[str] = None
    nargs: Optional[str] = None
    required: bool = False
    recorded: bool = True  # kept in the build's manifest (``options``) and signature


def flag(
    *names: str,
    default: Any = None,
    help: str | Callable[[], str],
    type: Optional[Callable[[str], Any]] = None,
    metavar: Optional[str] = None,
    choices: Optional[tuple] = None,
    action: Optional[str] = None,
    nargs: Optional[str] = None,
    required: bool = False,
    recorded: bool = True,
) -> Any:
    """A dataclass field that is also a command-line flag. A list default (``action="append"``,
    ``nargs="+"``) is copied for each instance."""
    spec = Flag(tuple(names), help, type, metavar, choices, action, nargs, required, recorded)
    metadata = {"flag": spec}
    if isinstance(default, list):
        return dataclasses.field(default_factory=lambda: list(default), metadata=metadata)
    if required:
        return dataclasses.field(metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def flags_of(cls: type) -> Any:
    """A field holding another flags class's flags (its own argument group)."""
    return dataclasses.field(default_factory=cls, metadata={"flags": cls})


def _fields(cls: type) -> Iterator[dataclasses.Field]:
    yield from dataclasses.fields(cls)


def add_flags(parser: argparse.ArgumentParser, cls: type, *, required: bool = True, into: Any = None) -> None:
    """Every flag of ``cls`` (and of the flags classes it holds) as argparse arguments: in an
    argument group when the class names one (``GROUP``), else where its holder's go
    (``into``). ``required=False``: no flag is required (a command that sets those itself)."""
    target: Any = into if into is not None else parser
    group = getattr(cls, "GROUP", None)
    if group:
        target = parser.add_argument_group(group)
    for f in _fields(cls):
        if "flags" in f.metadata:
            add_flags(parser, f.metadata["flags"], required=required, into=target)
            continue
        spec: Optional[Flag] = f.metadata.get("flag")
        if spec is None:
            continue
        kwargs: dict[str, Any] = {"dest": f.name, "help": spec.help() if callable(spec.help) else spec.help}
        if spec.required and required:
            kwargs["required"] = True
        else:
            default = f.default_factory() if f.default_factory is not MISSING else f.default
            kwargs["default"] = None if default is MISSING else default
        for name in ("type", "metavar", "choices", "action", "nargs"):
            value = getattr(spec, name)
            if value is not None:
                kwargs[name] = value
        target.add_argument(*spec.names, **kwargs)


def from_args(cls: type[T], args: argparse.Namespace) -> T:
    """The instance of ``cls`` that the parsed command line ``args`` gives."""
    values: dict[str, Any] = {}
    for f in _fields(cls):
        if "flags" in f.metadata:
            values[f.name] = from_args(f.metadata["flags"], args)
        elif "flag" in f.metadata and hasattr(args, f.name):
            values[f.name] = getattr(args, f.name)
    return cls(**values)


def flag_values(flags: Any, *, recorded_only: bool = False) -> dict[str, Any]:
    """Every flag's value by its ``dest``, flattened over the flags classes ``flags`` holds
    (``recorded_only``: those a build records in its manifest)."""
    out: dict[str, Any] = {}
    for f in _fields(type(flags)):
        value = getattr(flags, f.name)
        if "flags" in f.metadata:
            out.update(flag_values(value, recorded_only=recorded_only))
        elif "flag" in f.metadata and (f.metadata["flag"].recorded or not recorded_only):
            out[f.name] = value
    return out


def replace_flags(flags: T, **changes: Any) -> T:
    """``flags`` with some flags changed, wherever in its nested flags classes they are."""
    own = {f.name for f in _fields(type(flags))}
    direct = {k: v for k, v in changes.items() if k in own}
    rest = {k: v for k, v in changes.items() if k not in own}
    for f in _fields(type(flags)):
        if "flags" in f.metadata and rest:
            inner = getattr(flags, f.name)
            mine = {k: v for k, v in rest.items() if k in flag_values(inner)}
            if mine:
                direct[f.name] = replace_flags(inner, **mine)
                rest = {k: v for k, v in rest.items() if k not in mine}
    if rest:
        raise TypeError(f"no such flags: {', '.join(sorted(rest))}")
    return dataclasses.replace(flags, **direct)  # type: ignore[type-var]
