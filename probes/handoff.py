"""What the harness hands a probe process, in one place: the command line of ``python -m probes``.

Device, compile, CPU mode, the checks and the step timeout are ``probes.__main__``'s own options. What a
check needs beyond them arrives here too, never through an environment variable of ours: the guard
protocol module a build names (``--guard-module``), whether training runs (``--no-train``: the matrix's
``[options] train = false``), the path of each source tree under test (``--tree NAME=PATH``, NAME the
subject's ``tree``), and where the raw phase's findings may be shared with the other cells of the run
(``--raw-cache PATH``, a file named by the digest of everything the raw phase reads, computed by the
harness; ``--cell ID`` names this cell in what it stores there: see ``probes.rawcache``), and the size
and seed of a property-based suite (``--examples N``, ``--seed N``: the harness's settings, never read here
from the environment).
``probes.__main__`` parses them once and calls :func:`use`; the phases it forks inherit the value, and
those it spawns get the same options (:func:`argv`). A check reads :func:`given`.
The environment the probes read is then only what the code under test reads (``UNSLOTH_*`` and the like).
Stdlib only.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Handoff:
    """A probe process's inputs beyond device/compile/CPU mode: see the module docstring."""

    guard_module: str | None = None
    train: bool = True
    trees: Mapping[str, str] = field(default_factory=dict)
    raw_cache: str | None = None
    cell: str | None = None
    examples: int | None = None  # how many examples a property-based suite generates (None: the suite's own)
    seed: int | None = None  # and from which seed


_GIVEN = [Handoff()]  # this process's, set once by its command line (a list: no `global` needed)


def given() -> Handoff:
    """The hand-off of this probe process (the defaults when none was given: no guard module named, training
    on, no tree)."""
    return _GIVEN[0]


def use(handoff: Handoff) -> None:
    """Set this process's hand-off, once, from its command line."""
    _GIVEN[0] = handoff


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--guard-module", default=None, metavar="MODULE",
                    help="the guard protocol module the build names (default: the check's own)")
    ap.add_argument("--no-train", action="store_true", help="skip the steps marked training (they say why)")
    ap.add_argument("--tree", action="append", default=[], metavar="NAME=PATH",
                    help="the source tree of subject tree NAME is at PATH (repeatable)")
    ap.add_argument("--raw-cache", default=None, metavar="PATH",
                    help="reuse the raw phase's findings stored at PATH, or store them there (its name is the "
                         "digest of the raw phase's inputs)")
    ap.add_argument("--cell", default=None, metavar="ID", help="this cell's id, recorded with what it stores")
    ap.add_argument("--examples", type=int, default=None, metavar="N",
                    help="how many examples a property-based suite generates (default: the suite's own)")
    ap.add_argument("--seed", type=int, default=None, metavar="N", help="the seed those examples come from")


def from_args(args: argparse.Namespace) -> Handoff:
    trees = {}
    for item in args.tree:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise SystemExit(f"--tree {item!r}: expected NAME=PATH")
        trees[name] = path
    return Handoff(guard_module=args.guard_module or None, train=not args.no_train, trees=trees,
                   raw_cache=args.raw_cache or None, cell=args.cell or None,
                   examples=None if args.examples is None else max(1, args.examples), seed=args.seed)


def parse(args: list[str]) -> Handoff:
    """The hand-off in ``args`` alone (the inverse of :func:`argv`)."""
    ap = argparse.ArgumentParser(prog="python -m probes", add_help=False)
    add_arguments(ap)
    return from_args(ap.parse_args(args))


def argv(handoff: Handoff) -> list[str]:
    """The options that give ``handoff`` to another probe process (a spawned phase)."""
    out = [f"--guard-module={handoff.guard_module}"] if handoff.guard_module else []
    out += [] if handoff.train else ["--no-train"]
    out += [f"--tree={name}={path}" for name, path in handoff.trees.items()]
    out += [f"--examples={handoff.examples}"] if handoff.examples is not None else []
    out += [f"--seed={handoff.seed}"] if handoff.seed is not None else []
    out += [f"--raw-cache={handoff.raw_cache}"] if handoff.raw_cache else []
    return out + ([f"--cell={handoff.cell}"] if handoff.cell else [])
