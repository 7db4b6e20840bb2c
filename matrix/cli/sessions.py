"""What the nox sessions need besides the command line: which sessions nox was asked for, and a browser.

``requested_sessions`` reads nox's own command line in the process that loads
the noxfile: the cells of ``nox -s matrix`` must know they are prerequisites
of the fan-in (see ``noxfile.py``), and the session processes of ``nox -j``
inherit that answer through the environment. ``ensure_chromium`` gives the
tests session the browser the HTML test drives, installing Debian's
``chromium`` when it runs as root, or stopping with the one command to run.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from typing import Any

from matrix.errors import EnvironmentSetupError

SESSION_FLAGS = ("-s", "-e", "--session", "--sessions")


def requested_sessions(argv: list[str], default: list[str]) -> list[str] | None:
    """The session names on a nox command line (``-s a b``, ``--session=a``), ``default`` when none
    is named, None when selected some other way (``-k``, ``-t``): then nobody can tell."""
    names: list[str] = []
    collecting = False
    for tok in argv:
        if tok == "--":
            break
        if tok in SESSION_FLAGS:
            collecting = True
            continue
        if tok.startswith(tuple(f"{f}=" for f in SESSION_FLAGS[2:])):
            names.append(tok.split("=", 1)[1])
            collecting = False
            continue
        if tok in ("-k", "-t", "--keywords", "--tags"):
            return None
        if tok.startswith("-"):
            collecting = False
        elif collecting:
            names.append(tok)
    if not names and os.environ.get("NOXSESSION"):
        names = [n.strip() for n in os.environ["NOXSESSION"].split(",") if n.strip()]
    return names or list(default)


CHROMIUM_NAMES = ("chromium", "chromium-browser")
CHROMIUM_INSTALL = "sudo apt-get update && sudo apt-get install -y chromium"


def ensure_chromium(run: Callable[[list[str]], Any], *, which: Callable[[str], str | None] = shutil.which,
                    euid: Callable[[], int] = os.geteuid, log: Callable[[str], Any] = print) -> str:
    """The path of a Chromium for the browser test, installing Debian's ``chromium`` when running as
    root and it is missing; otherwise an error naming the one command to run. ``run`` runs a command
    and raises on failure (nox's ``session.run`` with ``external=True``)."""
    found = next((p for p in map(which, CHROMIUM_NAMES) if p), None)
    if found:
        return found
    if euid() != 0 or which("apt-get") is None:
        raise EnvironmentSetupError(f"the browser test needs Chromium, which is not on PATH; install it with: "
                                    f"{CHROMIUM_INSTALL}")
    log("chromium is missing: installing Debian's chromium (apt-get update first)")
    try:
        run(["apt-get", "update", "-qq"])
        run(["apt-get", "install", "-y", "-qq", "--no-install-recommends", "chromium"])
    except Exception as exc:  # whatever the runner raises (nox: CommandFailed), say what to do
        raise EnvironmentSetupError(f"installing chromium with apt-get failed ({exc}); install it by hand: "
                                    f"{CHROMIUM_INSTALL}") from exc
    found = next((p for p in map(which, CHROMIUM_NAMES) if p), None)
    if not found:
        raise EnvironmentSetupError("apt-get installed chromium but it is still not on PATH; "
                                    f"install it by hand: {CHROMIUM_INSTALL}")
    return found
