"""The derived figures of a phase record (phys_growth, phys_peak_growth,
phys_returned, resident_growth), session 32: the median record of repeats
that disagree on whether a phase was marked, and one definition for the
harness, the analysis frames and the sweep's effects.  Synthetic records
(test_analysis.py's helpers): fast, and no assertion depends on the
machine's load."""
import statistics

import pytest

from heaplab import analysis as hla
from heaplab.harness import PhaseRecord, median_arm
from test_analysis import MiB, arm, phase

pytestmark = pytest.mark.shares_the_machine


def drop_repeats(runs):
    """One arm run len(runs) times: a fill phase, then a drop phase whose
    (phys_before, lowest after the mark) in MiB is each run's, or
    (phys_before, None) for a repeat in which the drop was never marked
    (it ends at phys_before - 5 MiB)."""
    datas = []
    for k, (before, low) in enumerate(runs):
        fill = phase("E1", "on", "fill", 0, 0.0, 0.1, (10, before))
        if low is None:
            drop = phase("E1", "on", "drop", 1, 0.1, 0.2, (before, before - 5))
        else:
            drop = phase("E1", "on", "drop", 1, 0.1, 0.2, (before, low), marked=True)
        a = arm("E1", "on", [fill, drop])
        a["repeat"] = k
        datas.append(a)
    return datas


def test_median_of_repeats_that_disagree_on_the_mark_is_each_marked_repeats_own():
    """Repeat 1 of 3 never marked its drop.  The median record's
    phys_low_after_mark was repeat 0's (90 MiB: _median of a list with a
    None is the first value) beside the median phys_before (200 MiB), its
    derived phys_returned was left out (not every repeat had the parts),
    so PhaseRecord.returned fell back to 200 - 90 = 110 MiB: one run's low
    under the median's start, a figure no repeat had (each marked repeat
    returned 10 MiB).  Now every derived figure is the median of each
    repeat's own, over the repeats that have it, and the record says how
    many did (of_repeats) -- as heaplab report's wide() of the saved repeats."""
    datas = drop_repeats([(100, 90), (200, None), (300, 290)])
    m = median_arm(datas)
    drop = m["records"][1]
    assert drop["derived"]["phys_returned"] == 10 * MiB, drop["derived"]
    assert PhaseRecord(drop).returned == 10 * MiB, PhaseRecord(drop).returned / MiB
    # a part is the median of the repeats that have it too, never one run's
    assert drop["phys_low_after_mark"] == statistics.median([90, 290]) * MiB
    assert drop["of_repeats"] == {"phys_low_after_mark": 2, "phys_returned": 2}, drop
    assert m["repeats"] == 3
    # the figures every repeat has are the median of all three, no count
    assert drop["derived"]["phys_growth"] == -10 * MiB          # of -10, -5, -10
    assert m["records"][0].get("of_repeats") is None
    # the report of the saved repeats gives the same number
    report = hla.wide(datas, figures=["phys_returned"], unit="bytes")
    assert report.loc[("E1", "on", "drop"), "phys_returned"] == 10 * MiB
    # and so does the median record read on its own
    own = hla.wide(m, figures=["phys_returned"], unit="bytes")
    assert own.loc[("E1", "on", "drop"), "phys_returned"] == 10 * MiB
    # whichever repeat came first (the unmarked one took the figure away)
    m = median_arm([datas[1], datas[0], datas[2]])
    assert m["records"][1]["derived"]["phys_returned"] == 10 * MiB
    assert PhaseRecord(m["records"][1]).returned == 10 * MiB


def test_a_figure_no_repeat_has_is_absent_not_zero():
    """No repeat marked the drop: no phys_returned, no low after the mark,
    no count (the phase has no such figure, as a single run has not)."""
    m = median_arm(drop_repeats([(100, None), (200, None), (300, None)]))
    drop = m["records"][1]
    assert "phys_returned" not in drop["derived"]
    assert drop["phys_low_after_mark"] is None
    assert "of_repeats" not in drop
    frame = hla.records_frame(m, stats=False, notes=False)
    assert "phys_returned" not in set(frame["figure"])
