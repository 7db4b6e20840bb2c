"""Runtime confirmation of the history (``--confirm``): a few pairs installed for real and imported on CPU.

Which pairs (:func:`pick`): per unsloth release, both sides of every change of verdict along the zoo axis
(``boundary``), plus one pair of each equivalence class that no boundary pair already stands for
(``class``); newest first (unsloth, then zoo), at most ``--confirm-max``; with ``--confirm-spread N`` also N of
those classes spread evenly over the window (``spread``). Each is installed into a fresh uv
env (``unsloth==U`` and ``unsloth_zoo==Z``, both forced by an override, so a pair the floor refuses still
installs), and the pair reader's in-env entry (``<reader>.confirm``, on PYTHONPATH through
``matrix.envs.envrun``) runs ``import unsloth`` there the way a cell's unsloth process does on CPU
(``UNSLOTH_ALLOW_CPU=1``, offline, no accelerator visible), classifying a failure with the check's own rule.
The env is deleted after each pair; the outcome is cached per (unsloth wheel, zoo wheel, reader code), so a
rerun builds nothing.

The libraries unsloth patches at import (:data:`ERA_CAPPED`: transformers, TRL, PEFT, ...) are resolved as of the
pair's date (the later upload of the two wheels, ``--exclude-newer-package``), so an old pair meets the
transformers it was released against, not one years newer; torch, triton, xformers and bitsandbytes stay the
newest the metadata admits (the ones in the uv cache: an era torch is gigabytes per pair).

Per confirmed pair: ``runtime.outcome`` ``imports`` / ``skew`` (an ImportError or AttributeError naming zoo,
the innermost message; or a KeyError on a key unsloth reads from a zoo dict) / ``n/a`` (the environment: an
install that fails, an import that fails on something else; with the reason and where), ``runtime.mode`` and
``confirmed_by`` (:func:`merge`). An unsloth that asks the GPU inside ``import unsloth`` (``n/a`` for want of
an accelerator) is imported again in the same env with the accelerator queries stubbed (``<reader>.confirm
--stubbed``, the reader's ``stubbed.py``): ``mode`` ``stubbed``, and the real import's reason kept as
``plain_reason``. The ``confirm`` summary counts the window's equivalence classes by how each was confirmed or
why it could not be (:func:`tally`).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from packaging.version import Version

from matrix.envs import envrun
from matrix.scan.cache import write_atomic
from matrix.scan.confirm import INSTALL_TIMEOUT_S, PYTHON, RUN_TIMEOUT_S
from matrix.scan.history import grid, readers

DEFAULT_MAX = 12
ENTRY = "confirm"  # the in-env module of the pair reader's package
OUTCOMES = ("imports", "skew", "n/a")
CPU_ENV = {"UNSLOTH_ALLOW_CPU": "1", "CUDA_VISIBLE_DEVICES": ""}  # a cell's allow-cpu unsloth process, on CPU
# Nothing is installed during the import: unsloth 2025.1 .. 2025.3 runs `pip install --upgrade unsloth_zoo` when the
# zoo is older than it wants, unless told not to; pip and uv are kept off the index either way.
OFFLINE_ENV = {"UNSLOTH_DISABLE_AUTO_UPDATES": "1", "PIP_NO_INDEX": "1", "UV_OFFLINE": "1"}
NO_ACCELERATOR = "no accelerator: "  # classify_chain's reason for an import that asked the GPU
ERA_CAPPED = ("transformers", "trl", "peft", "accelerate", "datasets", "diffusers", "huggingface-hub", "tokenizers")
POLICY = "era-hf+stubbed-1"  # how a pair is installed and imported: part of the cache key


@dataclass(frozen=True)
class Outcome:
    """What ``import unsloth`` did in a pair's env (``outcome`` one of :data:`OUTCOMES`)."""

    outcome: str
    reason: str
    seconds: float
    versions: dict[str, str | None] | None = None
    cacheable: bool = True  # a failed install or a timeout is not the pair's answer: tried again next run
    mode: str = "plain"  # plain: the real import; stubbed: with the accelerator queries answered (stubbed.py)
    plain_reason: str | None = None  # stubbed: why the real import was n/a
    at: str | None = None  # a failed import: the unsloth or zoo line it failed at (the call, not torch's frame)
    raised_in: str | None = None  # a failed import: the package of the innermost frame (``xformers``)

    def to_dict(self) -> dict[str, Any]:
        out = {"outcome": self.outcome, "reason": self.reason, "seconds": round(self.seconds, 1),
               "versions": self.versions, "mode": self.mode}
        extra = {"plain_reason": self.plain_reason, "at": self.at, "raised_in": self.raised_in}
        return out | {k: v for k, v in extra.items() if v}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Outcome:
        return cls(d["outcome"], d["reason"], d["seconds"], d.get("versions"), mode=d.get("mode", "plain"),
                   plain_reason=d.get("plain_reason"), at=d.get("at"), raised_in=d.get("raised_in"))


def _newest_first(pair: tuple[str, str]) -> tuple[Version, Version]:
    return Version(pair[0]), Version(pair[1])


def boundaries(pairs: list[dict[str, Any]]) -> set[tuple[str, str]]:
    """Per unsloth release, the pairs on both sides of each change of verdict along the zoo axis."""
    rows: dict[str, list[dict[str, Any]]] = {}
    for p in pairs:
        rows.setdefault(p["unsloth"], []).append(p)
    out: set[tuple[str, str]] = set()
    for u, row in rows.items():
        for a, b in itertools.pairwise(sorted(row, key=lambda p: Version(p["zoo"]))):
            if a["verdict"] != b["verdict"]:
                out |= {(u, a["zoo"]), (u, b["zoo"])}
    return out


def pick(pairs: list[dict[str, Any]], max_n: int, spread: int = 0) -> list[tuple[str, str, str]]:
    """``(unsloth, zoo, why)`` to confirm, newest first: the boundary pairs, and the newest pair of every
    equivalence class none of them belongs to (``class``), at most ``max_n`` of them; with ``spread`` N, also
    the newest pair of N of those classes spread evenly over the window (``spread``: :func:`spread_evenly` of
    the classes in the order of their newest pair), so that older releases are confirmed too."""
    edge = boundaries(pairs)
    covered = {p["class"] for p in pairs if (p["unsloth"], p["zoo"]) in edge}
    reps: dict[str, tuple[str, str]] = {}
    for p in pairs:
        c, key = p.get("class"), (p["unsloth"], p["zoo"])
        if c is not None and c not in covered and (c not in reps or _newest_first(key) > _newest_first(reps[c])):
            reps[c] = key
    chosen = dict.fromkeys(edge, "boundary") | dict.fromkeys(reps.values(), "class")
    ordered = sorted(chosen, key=_newest_first, reverse=True)[:max(0, max_n)]
    spread_keys = spread_evenly(sorted(reps.values(), key=_newest_first), spread)
    why = dict.fromkeys(spread_keys, "spread") | {k: chosen[k] for k in ordered}
    return [(u, z, why[(u, z)]) for u, z in sorted(why, key=_newest_first, reverse=True)]


def spread_evenly(items: list[tuple[str, str]], n: int) -> list[tuple[str, str]]:
    """``n`` of ``items`` spread evenly (the middle of each of ``n`` equal stretches); all of them when
    ``n`` is not smaller."""
    if n >= len(items):
        return list(items)
    return [items[int((i + 0.5) * len(items) / n)] for i in range(max(0, n))]


CONFIRMED = {"runtime": "confirmed real", "runtime-stubbed": "confirmed stubbed", "inconsistent": "inconsistent"}
RANK = ("confirmed real", "confirmed stubbed", "inconsistent")  # a class's best answer over its picked pairs


def why_static(rt: dict[str, Any]) -> str:
    """Why a picked pair's runtime side is ``n/a``, as a category: the stub fell short at an accelerator query
    (named by the unsloth or zoo file that asked; the pair's ``runtime.at`` has the line), a package not resolved
    as of the pair's date raised (torch, xformers, ...: :data:`ERA_CAPPED` are), the pair does not install, or
    what else the import raised where."""
    stubbed, reason, pkg = rt.get("mode") == "stubbed", rt.get("reason", ""), rt.get("raised_in")
    at = rt["at"].rpartition(":")[0] if rt.get("at") else None
    if reason.startswith("uv ") or ("failed (exit" in reason and at is None):
        return "does not install"
    if stubbed and "no accelerator: " in reason:
        return f"stub insufficient: accelerator query at {at or '?'}"
    if pkg and pkg not in ("unsloth", "unsloth_zoo") and pkg.replace("_", "-") not in ERA_CAPPED:
        return f"needs a package of its era: {pkg}"
    error = reason.removeprefix("stub insufficient: ").removeprefix(NO_ACCELERATOR).split(":", 1)[0]
    return f"{'stub insufficient' if stubbed else 'environment'}: {error} at {at or '?'}"


def tally(pairs: list[dict[str, Any]], spread: int) -> dict[str, Any]:
    """The ``confirm`` block's count of the window's equivalence classes: ``counted`` (all of them), ``tally``
    (classes per category: ``confirmed real``, ``confirmed stubbed``, ``inconsistent``, ``static-only: <why>``
    (:func:`why_static`), ``not picked``; a class counts once, by its best picked pair), ``examples`` (one
    pair per category) and ``spread``."""
    best: dict[str, tuple[int, str, str]] = {}
    for p in pairs:
        c = p.get("class")
        if c is None:
            continue
        if "confirmed_by" not in p:
            cat = "not picked"
        elif p["confirmed_by"] in CONFIRMED:
            cat = CONFIRMED[p["confirmed_by"]]
        else:
            cat = f"static-only: {why_static(p['runtime'])}"
        rank = RANK.index(cat) if cat in RANK else (len(RANK) if cat != "not picked" else len(RANK) + 1)
        if c not in best or rank < best[c][0]:
            best[c] = (rank, cat, f"{p['unsloth']} x {p['zoo']}")
    counts: dict[str, int] = {}
    examples: dict[str, str] = {}
    for _, cat, pair in sorted(best.values()):
        counts[cat] = counts.get(cat, 0) + 1
        examples.setdefault(cat, pair)
    return {"counted": len(best), "tally": counts, "examples": examples, "spread": spread}


def merge(pair: dict[str, Any], rt: Outcome, why: str) -> dict[str, Any]:
    """The pair after confirmation. ``runtime``: the outcome agrees with the static verdict (``imports`` with
    compatible/degraded, ``skew`` with incompatible), or decides a static ``unknown`` (a skew makes it
    ``incompatible``); ``runtime-stubbed`` when that import ran with the accelerator queries stubbed.
    ``inconsistent``: they disagree (also stubbed); the pair's verdict becomes ``inconsistent``, so a pair whose
    import succeeds is never ``incompatible``. ``static-only``: the runtime side is ``n/a``."""
    static = pair["verdict"]
    out = {**pair, "static_verdict": static, "runtime": rt.to_dict(), "confirm_why": why}
    by = "runtime-stubbed" if rt.mode == "stubbed" else "runtime"
    if rt.outcome == "n/a":
        return {**out, "confirmed_by": "static-only"}
    if static == "unknown":
        return {**out, "confirmed_by": by, "verdict": "incompatible" if rt.outcome == "skew" else static}
    # a pair that breaks at model load imports, as the reading says: its import agrees, the load is static
    at_import = static == "incompatible" and pair.get("breaks_at", "import") != "model-load"
    agrees = (rt.outcome == "skew") == at_import
    if agrees:
        return {**out, "confirmed_by": by}
    return {**out, "confirmed_by": "inconsistent", "verdict": "inconsistent",
            "reason": f"INCONSISTENT: static says {static}; import unsloth{' (stubbed)' if by != 'runtime' else ''} "
                      f"{rt.outcome}: {rt.reason}"}


def entry_module(reader: str) -> str | None:
    """The reader package's in-env entry (``<reader>.confirm``), or None when the reader has none."""
    name = f"{reader}.{ENTRY}"
    return name if find_spec(name) is not None else None


def _read(path: Path) -> dict[str, Any] | None:
    try:
        out = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return out if isinstance(out, dict) else None


def era_options(era: str | None) -> list[str]:
    """uv options resolving :data:`ERA_CAPPED` as of ``era`` (an ISO time; none without one)."""
    return [f"--exclude-newer-package={name}={era}" for name in ERA_CAPPED] if era else []


def era_of(doc: dict[str, Any], unsloth: str, zoo: str) -> str | None:
    """The pair's date: the later upload time of its two wheels (None when either is unknown)."""
    u = next((r.get("uploaded") for r in doc["unsloth"] if r["version"] == unsloth), None)
    z = next((r.get("uploaded") for r in doc["zoo"] if r["version"] == zoo), None)
    return max(u, z) if u and z else None  # ISO-8601 UTC times order as text


def run_pair(unsloth: str, zoo: str, workdir: Path, *, entry: str, python: str = PYTHON,
             era: str | None = None) -> Outcome:
    """Install the pair into a fresh env under ``workdir`` (:data:`ERA_CAPPED` as of ``era``), run ``entry``
    there on CPU, and once more stubbed when the real import asked for an accelerator; delete the env."""
    t0 = time.monotonic()
    pins = [f"unsloth=={unsloth}", f"unsloth_zoo=={zoo}"]
    # The era options ride in the requirement list: `envrun.install` hands it to `uv pip install` as arguments.
    try:
        with envrun.throwaway(workdir, f"pair-{unsloth}-{zoo}-", python, pins + era_options(era), pins,
                              INSTALL_TIMEOUT_S) as env:
            return _import_in(env, t0, entry)
    except envrun.ThrowawayError as exc:
        return Outcome("n/a", str(exc), time.monotonic() - t0, cacheable=False)


def _import_in(env: envrun.Throwaway, t0: float, entry: str) -> Outcome:
    plain = _import_once(env, t0, entry, stubbed=False)
    if plain.outcome != "n/a" or not plain.reason.startswith(NO_ACCELERATOR):
        return plain
    again = _import_once(env, t0, entry, stubbed=True)
    return Outcome(again.outcome, again.reason, time.monotonic() - t0, again.versions or plain.versions,
                   again.cacheable, mode="stubbed", plain_reason=plain.reason, at=again.at, raised_in=again.raised_in)


def _import_once(env: envrun.Throwaway, t0: float, entry: str, *, stubbed: bool) -> Outcome:
    py, root, scratch = env.python, env.root, env.scratch
    result = root / f"import-{'stubbed' if stubbed else 'plain'}.json"
    ran = envrun.run([str(py), "-m", entry, "--out", str(result), *(["--stubbed"] if stubbed else [])], cwd=scratch,
                     timeout=RUN_TIMEOUT_S, env=envrun.clean_env(envrun.probes_path(root), **CPU_ENV, **OFFLINE_ENV))
    got = _read(result)
    if ran.returncode is None:
        return Outcome("n/a", f"import unsloth timed out after {RUN_TIMEOUT_S} s", time.monotonic() - t0,
                       cacheable=False)
    if got is None:
        return Outcome("n/a", f"the import process died (exit {ran.returncode}): {ran.tail(3)}",
                       time.monotonic() - t0)
    outcome = {"ok": "imports", "skew": "skew"}.get(got.get("class", ""), "n/a")
    return Outcome(outcome, str(got.get("reason", "")), time.monotonic() - t0, got.get("versions"),
                   at=got.get("at"), raised_in=got.get("raised_in"))


Runner = Callable[[str, str, Path], Outcome]


def _cache_file(folder: Path, u_sha: str | None, z_sha: str | None, key: str) -> Path | None:
    if not u_sha or not z_sha:
        return None
    return folder / f"{hashlib.sha256(f'{u_sha}-{z_sha}-{key}-{PYTHON}'.encode()).hexdigest()[:24]}.json"


def confirm(doc: dict[str, Any], *, max_n: int, cache: Path, log: Callable[[str], None],
            runner: Runner | None = None, spread: int = 0) -> dict[str, Any]:
    """``doc`` (the history document) with the picked pairs confirmed (:func:`pick`), its lines redone and a
    ``confirm`` summary (what was picked and confirmed how, and :func:`tally`'s count of the classes);
    ``runner`` is the runtime check (tests may pass theirs)."""
    _, t = readers.pair_target()
    folder = cache / "history-confirm"
    workdir = folder / "envs"
    picked = pick(doc["pairs"], max_n, spread)
    entry = entry_module(t.reader)
    summary: dict[str, Any] = {"max": max_n, "picked": len(picked), "confirmed_by": {}}
    if entry is None:
        summary["na"] = f"n/a: the pair reader {t.reader} has no in-env entry ({ENTRY}.py)"
    if runner is None and entry is not None:
        def runner(u: str, z: str, w: Path) -> Outcome:
            return run_pair(u, z, w, entry=entry, era=era_of(doc, u, z))
    sha = {("u", r["version"]): r.get("sha256") for r in doc["unsloth"]} | {
        ("z", r["version"]): r.get("sha256") for r in doc["zoo"]}
    key = readers.reader_key(t)
    by_key = {(p["unsloth"], p["zoo"]): i for i, p in enumerate(doc["pairs"])}
    pairs = list(doc["pairs"])
    for k, (u, z, why) in enumerate(picked, 1):
        cached = _cache_file(folder, sha[("u", u)], sha[("z", z)], key)
        old = _read(cached) if cached is not None else None
        if old is not None:
            rt = Outcome.from_dict(old)
        elif runner is None:
            rt = Outcome("n/a", summary["na"], 0.0, cacheable=False)
        else:
            workdir.mkdir(parents=True, exist_ok=True)
            rt = runner(u, z, workdir)
            if cached is not None and rt.cacheable:
                write_atomic(cached, json.dumps(rt.to_dict()))
        i = by_key[(u, z)]
        pairs[i] = merge(pairs[i], rt, why)
        summary["confirmed_by"][pairs[i]["confirmed_by"]] = summary["confirmed_by"].get(
            pairs[i]["confirmed_by"], 0) + 1
        stub = " (stubbed)" if rt.mode == "stubbed" else ""
        log(f"confirm [{k}/{len(picked)}] unsloth {u} x zoo {z} ({why}): static {pairs[i]['static_verdict']}, "
            f"runtime {rt.outcome}{stub} -> {pairs[i]['confirmed_by']} ({rt.seconds:.1f} s{', cached' if old else ''})"
            + (f": {rt.reason[:160]}" if rt.outcome != "imports" else ""))
    lines = [grid.release_line(u["version"], pairs) for u in doc["unsloth"]]
    runtime = (f"{len(picked)} pair(s) confirmed by `import unsloth` on CPU in a throwaway env (runtime-stubbed: "
               "with the accelerator queries stubbed): "
               + (", ".join(f"{v} {n}" for v, n in sorted(summary["confirmed_by"].items())) or "none"))
    return {**doc, "pairs": pairs, "lines": lines, "confirm": summary | tally(pairs, spread), "runtime": runtime}

