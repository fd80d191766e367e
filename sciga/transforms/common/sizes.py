"""Byte counts for people: ``mib(n)`` as messages print them (a limit below 1 MiB, such as
``--max-page-mb 0.01``, must not read "0 MiB, above the 0 MiB limit")."""

from __future__ import annotations


def mib(n: float) -> str:
    """``n`` bytes in MiB, with as many decimals as it takes to show a non-zero size."""
    value = n / (1 << 20)
    if value == 0 or value >= 10:
        return f"{value:.0f} MiB"
    for digits in (1, 2, 3, 4, 5, 6):
        text = f"{value:.{digits}f}"
        if float(text) != 0:
            return f"{text.rstrip('0').rstrip('.')} MiB"
    return f"{n:.0f} bytes"
