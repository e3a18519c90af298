"""How to install an optional extra, as the errors that need one say it."""

from __future__ import annotations


def install_hint(extra: str) -> str:
    """The command that installs ``extra``, in the index form and the checkout's.

    Both, because trio_relay is installed from a checkout until it is on the index, and
    there ``pip install 'trio_relay[extra]'`` answers "No matching distribution found".
    """
    return f"pip install 'trio_relay[{extra}]' (from a checkout: pip install '.[{extra}]')"
