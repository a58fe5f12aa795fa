"""pytest plugin: the `lab` fixture and the results table.

experiments/conftest.py registers it (pytest_plugins = ["heaplab.pytest_plugin"]).
Experiments hand their arm results to `lab.record(...)` and state each asserted
effect with `lab.effect(...)`; at the end of the session one table is printed:
experiment, arm, phase, figures in MiB, the effect we measured against what
is asserted, and the seed's figure beside ours where there is one.
"""
from __future__ import annotations

import json
import os

import pytest

from .harness import MiB, results_dir

_COLUMNS = ("experiment", "arm", "phase", "phys before", "phys after", "peak", "low after mark",
            "heap resident", "effect (ours | asserted)", "seed")


class Lab:
    def __init__(self):
        self.rows = []          # (experiment, arm, phase, record)
        self.effects = []       # dicts
        self._seen = set()

    def record(self, results):
        """Add arm results (a dict arm -> ArmResult, an ArmResult, or raw arm
        JSON dicts as Lua experiments print them) to the table."""
        if isinstance(results, dict) and "records" not in results:
            items = results.values()
        elif isinstance(results, (list, tuple)):
            items = results
        else:
            items = [results]
        for arm in items:
            data = getattr(arm, "data", arm)
            for r in data["records"]:
                key = (r["experiment"], r["arm"], r["phase"], r.get("index"))
                if key in self._seen:
                    continue
                self._seen.add(key)
                self.rows.append(r)

    def effect(self, experiment, what, ours, asserted, arm="", phase="", seed="", ok=None):
        """State an asserted effect for the table.  `ours` and `asserted` are
        short strings ("98.7% returned", ">= 97%")."""
        self.effects.append({"experiment": experiment, "arm": arm, "phase": phase, "what": what,
                             "ours": ours, "asserted": asserted, "seed": seed, "ok": ok})

    # -- rendering --
    def table_rows(self):
        def m(x):
            return "" if x is None else f"{x / MiB:.1f}"

        by_key = {}
        for e in self.effects:
            by_key.setdefault((e["experiment"], e["arm"], e["phase"]), []).append(e)
        out, used = [], set()
        for r in self.rows:
            key = (r["experiment"], r["arm"], r["phase"])
            effects = by_key.get(key, []) if key not in used else []
            used.add(key)
            first = True
            for e in effects or [None]:
                eff = seed = ""
                if e is not None:
                    mark = {True: "ok", False: "FAIL", None: ""}[e["ok"]]
                    eff = f"{e['what']}: {e['ours']} | {e['asserted']} {mark}".strip()
                    seed = e["seed"]
                out.append((r["experiment"], r["arm"], r["phase"],
                            m(r.get("phys_before")) if first else "",
                            m(r.get("phys_after")) if first else "",
                            m(r.get("phys_peak")) if first else "",
                            m(r.get("phys_low_after_mark")) if first else "",
                            m(r.get("resident_after")) if first else "",
                            eff, seed))
                first = False
        for key, effects in by_key.items():
            if key in used:
                continue
            for e in effects:
                mark = {True: "ok", False: "FAIL", None: ""}[e["ok"]]
                out.append((e["experiment"], e["arm"], e["phase"], "", "", "", "", "",
                            f"{e['what']}: {e['ours']} | {e['asserted']} {mark}".strip(), e["seed"]))
        return out

    def render(self):
        rows = self.table_rows()
        if not rows:
            return ""
        widths = [max(len(str(c)) for c in col) for col in zip(_COLUMNS, *rows)]
        def line(cells):
            return " | ".join(str(c).ljust(w) for c, w in zip(cells, widths)).rstrip()
        sep = "-+-".join("-" * w for w in widths)
        return "\n".join([line(_COLUMNS), sep] + [line(r) for r in rows])


_LAB = Lab()


@pytest.fixture(scope="session")
def lab():
    return _LAB


def pytest_terminal_summary(terminalreporter):
    text = _LAB.render()
    if not text:
        return
    terminalreporter.write_sep("=", "heaplab results (MiB; phys = phys_footprint)")
    terminalreporter.write_line(text)
    folder = results_dir()
    try:
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, "table.txt"), "w") as f:
            f.write(text + "\n")
        with open(os.path.join(folder, "effects.json"), "w") as f:
            json.dump(_LAB.effects, f, indent=1)
        terminalreporter.write_line(f"records: {folder}")
    except OSError:
        pass
