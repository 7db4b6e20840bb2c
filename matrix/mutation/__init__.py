"""Mutation score of a guard against its check's behaviour suite (``nox -s mutation``).

The harness side of mutation testing, for any check that declares a
mutation target (``mutation.py`` in its folder, see ``probes/checks``):
build (or reuse) one cell env for the target's vulnerable pairing, run the
check's probe-side runner in it (one ``import unsloth``, then load / install
/ test / uninstall per mutant), run what survived (and what the list calls
``unreachable``) again on each survivor zoo in turn (``matrix.mutation.survivors``),
then score what came back against the target's equivalence list (keyed by
mutant id, one line of argument each) and write ``mutation.json`` and
``mutation.md`` under the output directory.

Score = killed / (generated - equivalent), over the mutants that ran. Exit
codes: ``matrix.errors`` (0 the score meets the bar, 1 it does not, 2 no score).
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from matrix.envs import envrun
from matrix.errors import MutationError, command_parser, mutation_code, parse
from matrix.mutation import survivors
from matrix.spec import REPO_ROOT
from probes import checks
from probes.checks import MutationTarget
from reports.render import mutation_markdown

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

DEFAULT_BAR = 0.90
RUN_TIMEOUT_S = 3 * 3600


KINDS = ("equivalent", "unreachable")


@dataclass(frozen=True)
class Equivalent:
    """A survivor that no test can kill: ``equivalent`` (same behaviour for every input) or
    ``unreachable`` (differs only on a path this cell cannot take, e.g. a zoo without the kernel)."""

    id: str
    why: str
    kind: str = "equivalent"


@dataclass(frozen=True)
class Score:
    """What a run came to: counts, the score and the lists a reader acts on."""

    generated: int
    ran: int
    killed: int
    equivalent: int
    score: float | None
    bar: float
    # Counting the `unreachable` entries as survivors: what a reader who doubts them should see.
    strict_score: float | None = None
    survivors: list[dict[str, Any]] = field(default_factory=list)
    equivalents: list[dict[str, Any]] = field(default_factory=list)
    stale_equivalents: list[str] = field(default_factory=list)
    killed_by: dict[str, int] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return self.score is not None and self.score >= self.bar


def load_equivalents(path: Path) -> dict[str, Equivalent]:
    """``[[equivalent]]`` tables with ``id`` and ``why``; every problem in the file is reported at once."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise MutationError(f"{path}: cannot read the equivalence list ({exc})") from None
    except tomllib.TOMLDecodeError as exc:
        raise MutationError(f"{path}: not valid TOML ({exc})") from None
    problems: list[str] = []
    unknown = sorted(set(data) - {"equivalent"})
    if unknown:
        problems.append(f"unknown top-level key(s) {unknown}; valid: ['equivalent']")
    out: dict[str, Equivalent] = {}
    for i, entry in enumerate(data.get("equivalent", [])):
        where = f"equivalent[{i}]"
        if not isinstance(entry, dict):
            problems.append(f"{where}: expected a table")
            continue
        extra = sorted(set(entry) - {"id", "why", "kind"})
        if extra:
            problems.append(f"{where}: unknown key(s) {extra}; valid: ['id', 'kind', 'why']")
        mid, why, kind = entry.get("id"), entry.get("why"), entry.get("kind", "equivalent")
        if kind not in KINDS:
            problems.append(f"{where}: kind {kind!r}; valid: {list(KINDS)}")
        if not isinstance(mid, str) or not mid:
            problems.append(f"{where}: 'id' must be a non-empty string")
            continue
        if not isinstance(why, str) or not why.strip():
            problems.append(f"{where} ({mid}): 'why' must give a one-line argument")
        elif "\n" in why.strip():
            problems.append(f"{where} ({mid}): 'why' must be one line")
        if mid in out:
            problems.append(f"{where}: id {mid!r} listed twice")
        out[mid] = Equivalent(mid, str(why or "").strip(), str(kind))
    if problems:
        raise MutationError(f"{path}: {len(problems)} problem(s):\n" + "\n".join(f"  - {p}" for p in problems))
    return out


def score(doc: dict[str, Any], equivalents: dict[str, Equivalent], bar: float) -> Score:
    """Score the runner's document: killed (a timeout counts as killed) over the non-equivalent mutants."""
    mutants = doc.get("mutants")
    if not isinstance(mutants, list):
        raise MutationError("the runner's result has no 'mutants' list")
    killed = 0
    survivors, equal, killed_by = [], [], {}
    for m in mutants:
        status = m.get("status")
        if status not in ("killed", "survived", "timeout"):
            raise MutationError(f"mutant {m.get('id')!r}: unknown status {status!r}")
        if m["id"] in equivalents:
            equal.append({**_brief(m), "why": equivalents[m["id"]].why, "kind": equivalents[m["id"]].kind,
                          "status": status})
            continue
        if status == "survived":
            survivors.append(_brief(m))
        else:
            killed += 1
            by = m.get("killed_by") or status
            killed_by[by] = killed_by.get(by, 0) + 1
    ran_ids = {m["id"] for m in mutants}
    generated_ids = set(doc.get("all_ids") or ran_ids)
    # Listed but no longer generated, or listed but killed: the list needs a look.
    stale = sorted(i for i in equivalents if i not in generated_ids)
    stale += sorted(e["id"] for e in equal if e["status"] != "survived")
    denominator = len(mutants) - len(equal)
    value = killed / denominator if denominator else None
    strict_denominator = len(mutants) - sum(1 for e in equal if e["kind"] == "equivalent")
    strict = killed / strict_denominator if strict_denominator else None
    return Score(int(doc.get("generated", len(mutants))), len(mutants), killed, len(equal), value, bar,
                 strict, survivors, equal, stale, dict(sorted(killed_by.items())))


def _brief(m: dict[str, Any]) -> dict[str, Any]:
    return {k: m.get(k) for k in ("id", "operator", "scope", "line", "before", "after", "killed_by", "reason")}


def render_markdown(result: Score, meta: dict[str, Any]) -> str:
    """``mutation.md`` (``reports.render.mutation_markdown``)."""
    return mutation_markdown.render({**result.__dict__, "passed": result.passed}, meta)


# ---------------------------------------------------------------- env and runner


def target_of(check: str | None) -> tuple[str, MutationTarget]:
    """The check (folder) whose mutation target runs: the named one, or the only one that declares one."""
    try:
        name = checks.pick("mutation", check or "", sole=True)
    except checks.PickError as exc:
        raise MutationError(str(exc)) from None
    return name, checks.capability(name, "mutation")


def run_runner(python: Path, module: str, out_dir: Path, guard: Path, guard_module: str,
               sample: int | None, only: list[str] | None = None) -> dict[str, Any]:
    """Run the probe-side runner as a cell runs its probes (``matrix.envs.envrun``: PYTHONPATH exposing ``probes``
    only, offline), with unsloth's GPU path allowed on CPU; trust it only with exit 0."""
    work = out_dir / "work"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)  # import unsloth writes unsloth_compiled_cache/ into its cwd
    result = out_dir / "runner.json"
    result.unlink(missing_ok=True)
    env = envrun.clean_env(envrun.probes_path(out_dir), UNSLOTH_ALLOW_CPU="1")
    argv = [str(python), "-m", module, "--guard-file", str(guard), "--guard-module", guard_module,
            "--out", str(result), "--progress"]
    if sample is not None:
        argv += ["--sample", str(sample)]
    if only is not None:
        argv += ["--only", *only]
    res = envrun.run(argv, cwd=work, env=env, timeout=RUN_TIMEOUT_S)
    (out_dir / "runner.log").write_text(res.stdout + res.stderr, encoding="utf-8")
    doc = json.loads(result.read_text(encoding="utf-8")) if result.is_file() else None
    if res.returncode != 0 or doc is None:
        why = f": {doc['error']}" if doc and doc.get("error") else ""
        how = f"timed out after {RUN_TIMEOUT_S} s" if res.returncode is None else f"exited {res.returncode}"
        raise MutationError(f"{module} {how}{why}\n{res.tail(20)}\n(log: {out_dir}/runner.log)")
    return doc  # type: ignore[no-any-return]


def _out(args: argparse.Namespace) -> Path:
    return (args.out or args.run_out / "mutation").resolve()


def _env(path: Path | None, option: str) -> Path | None:
    if path is None:
        return None
    python = path / "bin" / "python"
    if not python.exists():
        raise MutationError(f"{option} {path}: no bin/python there")
    return python


def _parser() -> argparse.ArgumentParser:
    p = command_parser("mutation", prog="nox -s mutation --", description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=None,
                   help="output directory (default: mutation/ under $SKEWMATRIX_OUT, else reports/out/mutation)")
    p.add_argument("--env", type=Path, default=None,
                   help="use this existing env as is (installs nothing); default: build one under --out")
    p.add_argument("--sample", type=int, default=None, help="run a deterministic sample of N mutants (CI)")
    p.add_argument("--check", default=None,
                   help="id of the check whose mutation target runs (default: the only check that declares one)")
    p.add_argument("--guard-file", type=Path, default=None, help="default: the check's guard file")
    p.add_argument("--guard-module", default=None, help="default: the check's guard module")
    p.add_argument("--unsloth", default=None, help="default: the check's vulnerable pairing")
    p.add_argument("--zoo", default=None,
                   help="default: the check's vulnerable pairing (a release, or a backport FOLDER@RELEASE)")
    p.add_argument("--survivor-zoo", action="append", default=None, metavar="ZOO",
                   help="run the survivors (and the mutants listed unreachable) again on unsloth x this zoo: a "
                        "release, or a backport folder relative to the repository root applied to --zoo or to "
                        "FOLDER@RELEASE; repeatable, the passes run in the order given, each on what the ones "
                        "before left (default: the check's survivor zoos)")
    p.add_argument("--survivor-env", action="append", default=None, metavar="ZOO=DIR",
                   help="use this existing env for the pass on survivor zoo ZOO (installs nothing); repeatable")
    p.add_argument("--no-survivor-passes", action="store_true",
                   help="score the vulnerable pairing alone (no survivor zoo)")
    p.add_argument("--rescore", action="store_true",
                   help="score the runner results already under --out again (after editing the equivalence list)")
    p.add_argument("--bar", type=float, default=DEFAULT_BAR)
    p.add_argument("--equivalents", type=Path, default=None, help="default: the check's equivalence list")
    return p


def with_target(args: argparse.Namespace) -> argparse.Namespace:
    """``args`` with every option left unset taken from the check's mutation target."""
    name, t = target_of(args.check)
    defaults = {"guard_file": REPO_ROOT / t.guard_file, "guard_module": t.guard_module, "unsloth": t.unsloth,
                "zoo": t.zoo, "survivor_zoo": list(t.survivor_zoos), "equivalents": REPO_ROOT / t.equivalents}
    filled = {k: v if getattr(args, k) is None else getattr(args, k) for k, v in defaults.items()}
    return argparse.Namespace(**{**vars(args), **filled, "check": checks.info(name).id, "runner": t.runner})


def run(args: argparse.Namespace) -> tuple[Score, dict[str, Any]]:
    """The whole run (validate, build, run, the survivor passes, score, write): the score and the run's meta."""
    args = with_target(args)
    if not args.guard_file.is_file():
        raise MutationError(f"--guard-file {args.guard_file}: no such file")
    if args.sample is not None and args.sample < 1:
        raise MutationError(f"--sample {args.sample}: must be at least 1")
    if not 0.0 < args.bar <= 1.0:
        raise MutationError(f"--bar {args.bar}: must be in (0, 1]")
    equivalents = load_equivalents(args.equivalents)
    vulnerable, pairings, given = survivors.parse_pairings(
        args.zoo, [] if args.no_survivor_passes else args.survivor_zoo, args.survivor_env)
    module = args.runner
    out = _out(args)
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    if args.rescore:
        return rescore(out, equivalents, args.bar)
    python = _env(args.env, "--env") or survivors.build_env(out / "env", args.unsloth, vulnerable.source)
    guard = args.guard_file.resolve()
    doc = run_runner(python, module, out, guard, args.guard_module, args.sample)
    passes = [{"zoo": vulnerable.label, "source": vulnerable.source.describe(), "env": str(python.parent.parent),
               "ran": len(doc["mutants"]),
               "killed": [m["id"] for m in doc["mutants"] if m["status"] != "survived"]}]
    equivalent = {i for i, e in equivalents.items() if e.kind == "equivalent"}
    passes += [survivor_pass(doc, p, given.get(p.spec), equivalent, args, out, guard) for p in pairings]
    result = score(doc, equivalents, args.bar)
    meta = {"guard_file": str(args.guard_file), "guard_module": args.guard_module, "unsloth": args.unsloth,
            "zoo": args.zoo, "env": str(python.parent.parent), "sample": args.sample, "passes": passes,
            "seconds": round(time.perf_counter() - start, 1), "runner": module, "check": args.check}
    write(out, doc, result, meta)
    return result, meta


def survivor_pass(doc: dict[str, Any], pairing: survivors.ZooPairing, env: Path | None, equivalent: set[str],
                  args: argparse.Namespace, out: Path, guard: Path) -> dict[str, Any]:
    """Run what is still alive (``survivors.again``) on unsloth x ``pairing``, in ``env`` or one built under
    ``out``, and fold the outcome into ``doc``; the pass's record for the meta (zoo, env, ran, killed ids)."""
    ids = survivors.again(doc["mutants"], equivalent)
    record: dict[str, Any] = {"zoo": pairing.label, "source": pairing.source.describe(), "env": None,
                              "ran": len(ids), "killed": []}
    if not ids:
        return record  # nothing left for this zoo: no env to build
    if env is None:  # --survivor-env gives an existing one, used as is
        env = out / f"env-{pairing.slug}"
        survivors.build_env(env, args.unsloth, pairing.source)
    python = env / "bin" / "python"
    record["env"] = str(env)
    other = run_runner(python, args.runner, out / f"pass-{pairing.slug}", guard, args.guard_module, None, ids)
    record["killed"] = survivors.merge_pass(doc, other, pairing.label)
    return record


def write(out: Path, doc: dict[str, Any], result: Score, meta: dict[str, Any]) -> None:
    """``mutation.json`` (meta, score, every mutant) and ``mutation.md`` under ``out``."""
    (out / "mutation.json").write_text(json.dumps({"meta": meta, "score": result.__dict__, "passed": result.passed,
                                                   "mutants": doc["mutants"], "all_ids": doc.get("all_ids"),
                                                   "generated": doc.get("generated"),
                                                   "baseline": doc.get("baseline"),
                                                   "out_of_scope": doc.get("out_of_scope")},
                                                  indent=2, default=str) + "\n", encoding="utf-8")
    (out / "mutation.md").write_text(render_markdown(result, meta), encoding="utf-8")


def rescore(out: Path, equivalents: dict[str, Equivalent], bar: float) -> tuple[Score, dict[str, Any]]:
    """Score the mutants of the last run under ``out`` (its mutation.json) with the current equivalence list."""
    path = out / "mutation.json"
    try:
        last = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise MutationError(f"--rescore: cannot read {path} ({exc}); run without --rescore first") from None
    result = score(last, equivalents, bar)
    write(out, last, result, last.get("meta", {}))
    return result, last.get("meta", {})


def main(argv: list[str], out: Path) -> int:
    """See the module docstring for the exit codes; a failure raises ``MutationError`` (``matrix.cli.guarded``
    turns it into 2)."""
    args = parse(_parser(), argv)
    if isinstance(args, int):
        return args
    args.run_out = out  # the run's output directory (``matrix.cells.runs``), under which --out defaults
    result, meta = run(args)
    pct = "n/a" if result.score is None else f"{result.score:.1%}"
    strict = "n/a" if result.strict_score is None else f"{result.strict_score:.1%}"
    print(f"mutation score {pct} ({result.killed}/{result.ran - result.equivalent} non-equivalent killed, "
          f"{result.equivalent} equivalent or unreachable, bar {result.bar:.0%}): {'pass' if result.passed else 'FAIL'}"
          f"; {strict} counting unreachable ones as survivors")
    for s in result.survivors:
        print(f"  survivor {s['id']} (line {s['line']}): {s['before']!r} -> {s['after']!r}")
    for i, p in enumerate(meta.get("passes") or []):
        killed = len(p["killed"]) if i == 0 else ", ".join(p["killed"]) or "none"
        print(f"  pass {i + 1}, zoo {p['zoo']}: {p['ran']} run, killed {killed}")
    out = _out(args)
    print(f"written: {out / 'mutation.json'}, {out / 'mutation.md'}")
    return mutation_code(result.passed)
