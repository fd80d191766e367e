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


def _kind(mode: int) -> str:
    import stat

    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISDIR(mode):
        return "a folder"
    return "not a regular file"


def _stat_input(path: str, flag: str, what: str):
    """os.stat of a path a command reads (links followed; a FIFO is never opened, so never
    blocks); one sentence when it is missing or may not be read."""
    try:
        return os.stat(path)
    except FileNotFoundError:
        raise UserError(f"{flag} {path} does not exist; give {what}.") from None
    except PermissionError:
        raise UserError(f"{flag} {path} cannot be read by this user; give {what} you can read.") from None
    except OSError as e:
        raise UserError(f"{flag} {path} cannot be read ({e.strerror or e}); give {what}.") from None


def check_input_file(path: str, flag: str, what: str = "a file") -> None:
    """``path`` (a local path a command reads) is a regular file this user may read: checked
    with ``stat`` before anything opens it, so a FIFO or a device is refused instead of
    blocking the command in ``open()``. Remote paths are left to their store's checks."""
    import stat

    if not _local(path):
        return
    st = _stat_input(path, flag, what)
    if not stat.S_ISREG(st.st_mode):
        raise UserError(f"{flag} {path} is {_kind(st.st_mode)}, not a file; give {what}.")
    if not os.access(path, os.R_OK):
        raise UserError(f"{flag} {path} cannot be read by this user; give {what} you can read.")


def check_input_folder(path: str, flag: str, what: str = "a folder") -> None:
    """``path`` (a local path a command reads) is a folder this user may list."""
    import stat

    if not _local(path):
        return
    st = _stat_input(path, flag, what)
    if not stat.S_ISDIR(st.st_mode):
        kind = "a file" if stat.S_ISREG(st.st_mode) else _kind(st.st_mode)
        raise UserError(f"{flag} {path} is {kind}, not a folder; give {what}.")
    if not os.access(path, os.R_OK | os.X_OK):
        raise UserError(f"{flag} {path} cannot be read by this user; give {what} you can read.")


def check_weights_path(path: str, flag: str) -> None:
    """A weights option takes a local path or a Hugging Face repo id: a path that exists
    must be a file or a folder, never a FIFO or a device (``torch.load`` would block on it)."""
    import stat

    if not _local(path) or not os.path.lexists(path):
        return
    st = _stat_input(path, flag, "a checkpoint file or a Hugging Face repo id")
    if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
        raise UserError(f"{flag} {path} is {_kind(st.st_mode)}; give a checkpoint file or a Hugging Face repo id.")
