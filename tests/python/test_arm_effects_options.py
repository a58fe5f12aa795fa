"""The experiments' arm_effects judge an arm by the options its heap ran
with: a sweep's grid value (--set page_release=true,false) or --env reaches
the heap as HEAPLAB_<NAME> and is in the record's sweep.env, not in
data["options"] -- E1 judged a page_release=false cell of its on arm against
the >= 97% threshold and reported it failed (session 20's hunt).

No arm runs here: the arm JSON is written by hand."""
import os

import pytest

from heaplab.harness import arm_option
from heaplab.notebooks import experiment_module

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MiB = 1 << 20

pytestmark = pytest.mark.shares_the_machine


def rec(phase, before, after, low=None, peak=None):
    return {"phase": phase, "phys_before": before, "phys_after": after,
            "phys_low_after_mark": low, "phys_peak": peak or max(before, after), "notes": {}}


def swept(env, arm, options=None):
    return {"arm": arm, "options": options or {}, "notes": {"warm_bytes": 4 * MiB},
            "sweep": {"env": env, "values": {}}}


def effect(effects, name):
    (e,) = [e for e in effects if e["effect"] == name]
    return e


def test_arm_option_reads_options_then_the_sweeps_env_then_the_default():
    assert arm_option({"options": {"page_release": False}}, "page_release") is False
    assert arm_option({"options": {}}, "page_release") is True          # the default
    for raw, want in (("false", False), ("0", False), ("OFF", False), ("yes", True)):
        assert arm_option(swept({"HEAPLAB_PAGE_RELEASE": raw}, "on"), "page_release") is want
    # the arm's own option wins over the environment, as in the library
    assert arm_option(swept({"HEAPLAB_PAGE_RELEASE": "true"}, "off", {"page_release": False}),
                      "page_release") is False
    assert arm_option(swept({"HEAPLAB_PAGE_SIZE": "16k"}, "on"), "page_size") == 16384
    assert arm_option(swept({"HEAPLAB_RELEASE_ADVICE": "free"}, "on"), "release_advice") == "free"
    with pytest.raises(KeyError):
        arm_option({}, "no_such_option")


def test_e1_judges_a_grid_page_release_false_cell_as_not_releasing():
    e1 = experiment_module(os.path.join(ROOT, "experiments", "test_e1_page_floor.py"))
    data = swept({"HEAPLAB_PAGE_RELEASE": "false"}, "on")
    data["records"] = [rec("fill", 10 * MiB, 42 * MiB),
                       rec("drop", 42 * MiB, 42 * MiB, low=42 * MiB),        # nothing back
                       rec("textures", 42 * MiB, 74 * MiB)]
    e = effect(e1.arm_effects(data), "returned_fraction")
    assert (e["direction"], e["threshold"], e["passed"]) == ("<=", 0.05, True), e
    # and a cell with page_release on (the default) is held to >= 97%
    data["sweep"]["env"] = {"HEAPLAB_PAGE_RELEASE": "true"}
    e = effect(e1.arm_effects(data), "returned_fraction")
    assert (e["direction"], e["threshold"], e["passed"]) == (">=", 0.97, False), e


def test_e7_judges_an_interior_arm_without_conservative_interior_as_releasing():
    e7 = experiment_module(os.path.join(ROOT, "experiments", "test_e7_stale_roots.py"))
    data = swept({"HEAPLAB_CONSERVATIVE_INTERIOR": "0"}, "interior")
    data["records"] = [rec("build", 10 * MiB, 74 * MiB),
                       rec("drop", 74 * MiB, 74 * MiB, low=14 * MiB),        # all but warm
                       rec("scrub", 14 * MiB, 14 * MiB, low=14 * MiB)]
    e = effect(e7.arm_effects(data), "drop_returned_fraction")
    assert (e["direction"], e["threshold"], e["passed"]) == (">=", 0.97, True), e
    data["sweep"]["env"] = {}
    e = effect(e7.arm_effects(data), "drop_returned_fraction")
    assert (e["direction"], e["threshold"], e["passed"]) == ("<=", 0.05, False), e
