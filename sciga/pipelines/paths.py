"""Paths a person gives on the command line, checked before any work starts.

A folder a command writes into (``--output`` of build and fetch, the report, stats and browse
folders) must be a folder, or a place where one can be made, that this process may write.
Each problem is one sentence naming the path and what to do (``UserError``), instead of the
``FileExistsError`` / ``NotADirectoryError`` / ``PermissionError`` traceback that a write deep
inside a command would end in. Remote locations (``gs://``, ``hf://`` ...) are left to their
own checks (``transforms/common/storage.py``).
"""

from __future__ import annotations

import os

from sciga.transforms.common.errors import UserError


def _local(path: str) -> bool:
    return "://" not in path and "::" not in path


def check_output_folder(path: str, flag: str, advice: str = "") -> None:
    """``path`` is a folder this process can write, or one it can make. ``flag`` names where
    the path came from (``--output``, ``the build folder``); ``advice`` is the way out when
    the folder may not be written (e.g. "give --report PATH")."""
    if not _local(path):
        return
    full = os.path.abspath(path)
    if os.path.exists(full) and not os.path.isdir(full):
        raise UserError(f"{flag} {path} is a file, not a folder; give a folder path (a missing folder is made).")
    existing = full
    while not os.path.exists(existing):
        parent = os.path.dirname(existing)
        if parent == existing:
            break
        existing = parent
    if not os.path.isdir(existing):
        raise UserError(f"{flag} {path} cannot be made because {existing} is a file, not a folder; give another path.")
    if not os.access(existing, os.W_OK | os.X_OK):
        where = "is read-only" if existing == full else f"cannot be made: {existing} is read-only"
        raise UserError(
            f"{flag} {path} {where} for this user; "
            + (advice or "give a folder you can write to, or change its permissions")
            + "."
        )


def check_output_file(path: str, flag: str, advice: str = "") -> None:
    """``path`` is a file this process can write (its folder exists or can be made)."""
    if not _local(path):
        return
    full = os.path.abspath(path)
    if os.path.isdir(full):
        raise UserError(f"{flag} {path} is a folder; give a file path.")
    if os.path.exists(full) and not os.access(full, os.W_OK):
        raise UserError(
            f"{flag} {path} is read-only for this user; "
            + (advice or "give a file you can write, or change its permissions")
            + "."
        )
    check_output_folder(os.path.dirname(full), flag=f"the folder of {flag}", advice=advice)
