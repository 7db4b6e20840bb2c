"""Canonical cell results written by hand for the classification and renderer tests."""

from __future__ import annotations

from typing import Any


def behaviour(outcomes: dict[str, str], guard_found: bool) -> dict[str, Any]:
    tests = [{"id": tid, "title": tid, "outcome": o, "reason": "" if o == "pass" else f"why {tid}",
              "duration_s": 0.1} for tid, o in outcomes.items()]
    return {"schema": 1, "guard_found": guard_found, "tests": tests}


def make_cell(
    cell_id: str = "u1__z1",
    *,
    static: str = "vulnerable",
    runtime: str = "vulnerable",
    original: bool = True,
    finite: bool = False,
    behavior: dict[str, Any] | None = None,
    error: dict[str, Any] | None = None,
    runtime_status: str = "ok",
    guard_status: str = "ok",
) -> dict[str, Any]:
    u, z = cell_id.split("__")
    steps = [
        {"name": "runtime", "status": runtime_status, "seconds": 15.0, "returncode": 0,
         "reason": None if runtime_status == "ok" else "runtime was killed by SIGABRT",
         "result": {"verdict": runtime, "reason": f"runtime says {runtime}"} if runtime_status == "ok" else None},
        {"name": "guard", "status": guard_status, "seconds": 22.0, "returncode": 0,
         "result": {"forward": {"original": original},
                    "all_masked_finite": finite,
                    "routes": {"public": {"loss": 0.0 if finite else "nan"}}} if guard_status == "ok" else None},
    ]
    if behavior is not None:
        steps.append({"name": "behavior", "status": "ok", "seconds": 30.0, "returncode": 0, "result": behavior})
    return {
        "schema": "skewmatrix.cell/1",
        "cell_id": cell_id,
        "matrix": "matrix/test.toml",
        "seconds": 42.0,
        "builds": {
            "unsloth": {"name": u, "package": "unsloth", "source": "pypi", "describe": "pypi 2026.10.9",
                        "version": "2026.10.9", "installed_version": "2026.10.9", "digest": "a" * 64},
            "zoo": {"name": z, "package": "unsloth-zoo", "source": "pypi", "describe": f"pypi {z}",
                    "version": z, "installed_version": z, "digest": "b" * 64},
        },
        "options": {"python": "3.11", "device": "cpu", "compile": "auto", "cpu_mode": "allow-cpu",
                    "timeout": 1800, "torch": ""},
        "steps": [{"name": "install", "seconds": 2.0, "ok": True}, {"name": "probes", "seconds": 37.0, "ok": True}],
        "admissible": {"value": False, "method": "uv pip compile (no overrides)",
                       "message": "error: No solution found\n  unsatisfiable."},
        "installed": [],
        "torch": {"version": "2.12.1", "local": None},
        "probes": None if error else {"schema": "skewmatrix.probes/1", "device": "cpu", "compile": "off",
                                      "cpu_mode": "allow-cpu",
                                      "static": {"verdict": static, "reason": f"static says {static}"},
                                      "steps": steps},
        "error": error,
    }
