"""A real E1 arm pair loaded by heaplab.analysis: what the harness writes.  Kept
apart from test_analysis.py (whose tests share the machine in make test): its
arms measure their own footprint."""
import os

from heaplab import analysis as hla
from heaplab.notebooks import experiment_module

MiB = 1 << 20
HERE = os.path.dirname(os.path.abspath(__file__))


def test_real_e1_arms_load(tmp_path, monkeypatch):
    monkeypatch.setenv("HEAPLAB_RESULTS", str(tmp_path))
    e1 = experiment_module("e1", start=HERE)
    res = e1.E1.run(env={"HEAPLAB_E1_FILL_MIB": "16", "HEAPLAB_E1_TEXTURES_MIB": "16"})
    live = hla.records_frame(res)
    disk = hla.records_frame(tmp_path / "E1")
    assert len(live) == len(disk) and set(live["arm"]) == {"off", "on", "huge"}
    phases = ["fill", "hold", "drop", "textures", "texture_drop", "textures_again"]
    assert hla.phases_frame(res)["phase"].tolist() == phases * 3
    key = ["experiment", "arm", "phase", "figure"]
    assert not live.duplicated(key).any()
    v = live.set_index(["arm", "phase", "figure"])["value"]
    # 16 MiB of small objects: on gives most of it back, off nothing
    assert v["on", "drop", "phys_returned"] > 0.8 * v["on", "fill", "phys_growth"] - 4 * MiB
    assert v["off", "drop", "phys_returned"] < 0.2 * v["off", "fill", "phys_growth"]
    s = hla.series_frame(res)
    assert len(s) > 10
    assert all(g["t_s"].is_monotonic_increasing for _, g in s.groupby("arm"))
    assert set(s["phase"].dropna()) <= set(phases)
    fig = hla.plot_footprint(res)
    assert len(fig.axes) == 1
