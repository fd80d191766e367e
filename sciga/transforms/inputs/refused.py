"""Inputs the listing meets but will not read: each is counted among the build's inputs and
becomes one dead letter (stage ``read``, ``scope = "input"``) naming it and why, so that
``inputs = papers + dead-lettered inputs`` holds for everything the listing saw.

What the listing refuses before anything is opened:

* ``outside_input``: a page behind a link to a folder that leads outside the input (listed
  by its name through the link; its bytes are never read), or such a link itself when the
  folder behind it holds more entries than the listing looks at;
* ``path_too_long``: a page whose path is 4,096 bytes or more (no file call takes it);
* ``bad_name``: a file name that is not valid UTF-8 (Linux allows any bytes; the dataset's
  text columns cannot hold them: the name is given with ``\\xNN`` escapes), or an object
  whose key ends in ``/`` (every reader takes it for a folder);
* ``unsafe_member``: an ar5iv dump member whose name is absolute, climbs out with ``..`` or
  holds ``::`` (it cannot be addressed inside the archive).

A refused input travels as a ``RefusedInput``: a ``str`` equal to its URI (it sorts, hashes
and counts as the input it is) that carries the reason. Between the input-list file and the
plan step it is a line ``[uri, null, error_type, message]`` and then a string that starts
with a NUL byte (``element``): no file has such a name, so even a step that took it for a
path could open nothing.
"""

from __future__ import annotations

import json
from typing import Optional

OUTSIDE_INPUT = "outside_input"
PATH_TOO_LONG = "path_too_long"
BAD_NAME = "bad_name"
UNSAFE_MEMBER = "unsafe_member"
REFUSED_KINDS = (OUTSIDE_INPUT, PATH_TOO_LONG, BAD_NAME, UNSAFE_MEMBER)

STAGE = "read"
_ELEMENT_PREFIX = "\x00refused:"
_NAME_IN_MESSAGE = 300  # characters of a very long name quoted in a message


class RefusedInput(str):
    """An input URI the listing refused, with the dead letter's ``error_type`` and message."""

    kind: str
    message: str

    def __new__(cls, uri: str, kind: str, message: str) -> RefusedInput:
        obj = super().__new__(cls, uri)
        obj.kind, obj.message = kind, message
        return obj

    def __reduce__(self):
        return (RefusedInput, (str(self), self.kind, self.message))

    @property
    def uri(self) -> str:
        return str(self)

    def line(self) -> list:
        """The input-list line's value (``build_inputs.input_list_lines``)."""
        return [self.uri, None, self.kind, self.message]

    def element(self) -> str:
        """What flows from the input list to the plan step (see the module's docstring)."""
        return _ELEMENT_PREFIX + json.dumps([self.uri, self.kind, self.message], ensure_ascii=True)


def from_line(value) -> Optional[RefusedInput]:
    """The refused input an input-list line holds, else None."""
    if isinstance(value, list) and len(value) == 4 and value[2] in REFUSED_KINDS:
        return RefusedInput(value[0], value[2], value[3])
    return None


def from_element(element) -> Optional[RefusedInput]:
    """The refused input a pipeline element stands for, else None."""
    if isinstance(element, RefusedInput):
        return element
    if isinstance(element, str) and element.startswith(_ELEMENT_PREFIX):
        uri, kind, message = json.loads(element[len(_ELEMENT_PREFIX) :])
        return RefusedInput(uri, kind, message)
    return None


def quoted(name: str) -> str:
    """A name for a message: whole, or its start and end when it is very long."""
    if len(name) <= _NAME_IN_MESSAGE:
        return name
    half = _NAME_IN_MESSAGE // 2
    return f"{name[:half]}...{name[-half:]} ({len(name)} characters)"


# ------------------------------------------------------------------ the reasons, in one place
# (each error type written out where it is given: tests/project/test_docs.py reads them here)


def _refuse(uri: str, error_type: str, message: str) -> RefusedInput:
    assert error_type in REFUSED_KINDS, error_type
    return RefusedInput(uri, error_type, message)


def outside(uri: str) -> RefusedInput:
    return _refuse(
        uri,
        "outside_input",
        f"{quoted(uri)} lies behind a link to a folder outside the input, so it was not read; copy the folder "
        "into the input instead of linking to it.",
    )


def outside_folder(link: str, looked_at: int) -> RefusedInput:
    return _refuse(
        link,
        "outside_input",
        f"{quoted(link)} is a link to a folder outside the input that holds more than {looked_at:,} entries; "
        "none of them was read and only the first were listed; copy the pages into the input instead of "
        "linking to them.",
    )


def too_long(uri: str, n_bytes: int, limit: int) -> RefusedInput:
    return _refuse(
        uri,
        "path_too_long",
        f"{quoted(uri)}: its path is {n_bytes:,} bytes, and the system's file calls take at most "
        f"{limit - 1:,}, so it was not read; move the page to a shorter path.",
    )


def not_utf8(escaped: str) -> RefusedInput:
    return _refuse(
        escaped,
        "bad_name",
        f"{quoted(escaped)}: the file name is not valid UTF-8 (the bytes shown as \\xNN), so the dataset "
        "cannot name it and it was not read; rename it to UTF-8 (e.g. with convmv).",
    )


def key_is_folder(uri: str) -> RefusedInput:
    return _refuse(
        uri,
        "bad_name",
        f"{quoted(uri)}: the object's key ends in '/', which every reader takes for a folder, so it was not "
        "read; copy it to a key without the trailing '/'.",
    )


def unsafe_member(uri: str, why: str) -> RefusedInput:
    return _refuse(
        uri,
        "unsafe_member",
        f"{quoted(uri)}: the dump member's name {why}, so it was not read; rebuild the dump with plain "
        "relative member names.",
    )


def escaped_name(path: str) -> str:
    """A file name Python read with ``surrogateescape`` (bytes that are not UTF-8), as text
    with ``\\xNN`` for those bytes."""
    return path.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def is_utf8(path: str) -> bool:
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
