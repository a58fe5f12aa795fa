"""The analysis side's leftovers of session 40 (session 41): the
incomplete-report marker's check of another report by more than its pid,
figure names in a script the default font lacks, the CLI on unusual but
legal inputs.  The folders are written by hand: no arm runs here."""
import os
import socket

import pytest

from heaplab import analysis as hla
from heaplab.__main__ import main
from test_analysis_s39 import _arm, _results

pytestmark = pytest.mark.shares_the_machine


# ---- the incomplete-report marker: which entries are of reports still running ---------------

def _entry(src, pid, tag, ident=""):
    return (f"This report is incomplete: `heaplab report` of {src} into this folder, "
            f"started 2026-12-07 08:00:00 UTC (pid {pid}), did not finish -- ...\n"
            f"(report {pid}-{tag}{ident})\n")


def _here():
    """(host, boot id, pid namespace) as /proc says them (not heaplab's helper)."""
    with open("/proc/sys/kernel/random/boot_id") as f:
        boot = f.read().strip()
    ns = os.readlink("/proc/self/ns/pid").split("[")[1].rstrip("]")
    return socket.gethostname(), boot, ns


def _start(pid):
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[19]


def test_a_marker_entry_is_judged_by_its_process_not_its_pid_alone(tmp_path, capsys):
    """An entry of the marker named its report by pid only (os.kill(pid, 0)):
    a pid reused since by another process kept the entry of a report long
    stopped, and "another report is writing into this folder now" was said
    of it; an entry written on another host (a shared folder) was dropped
    when no process here had its pid -- that report perhaps still writing.
    Now an entry names its process (host, boot id, pid namespace, start
    time): a reused pid is a report gone; another host's entry is kept and
    said as one this machine cannot see."""
    res = _results(tmp_path / "res", _arm("E1", "on", 20), _arm("E1", "off", 40))
    out = res / "report"
    os.makedirs(out)
    host, boot, ns = _here()
    here = f" on {host}: boot {boot}, pid namespace {ns}, process start "
    start1 = _start(1)
    running = _entry("/running/results", 1, "0a0b", here + start1)
    reused = _entry("/reused/results", 1, "0c0d", here + str(int(start1) + 7))
    remote = _entry("/remote/results", 999999999, "0e0f",
                    " on otherhost: boot 0000-1111, pid namespace 4026531836, process start 55")
    (out / hla.INCOMPLETE_MARKER).write_text("\n".join([running, reused, remote]))
    assert main(["report", str(res)]) == 0
    said = capsys.readouterr().out
    assert (f"{out}: another report is writing into this folder now (pid 1: `heaplab report` "
            f"of /running/results)") in said, said
    assert "of /reused/results" not in said, said
    assert f"{out}: an earlier report here did not complete" in said, said
    assert (f"{out}: a report on host otherhost (pid 999999999: `heaplab report` of "
            f"/remote/results) did not complete or is still writing into this folder -- this "
            f"machine cannot tell") in said, said
    # the running one's and the remote one's entries kept; the reused pid's and its own gone
    assert (out / hla.INCOMPLETE_MARKER).read_text() == running + "\n" + remote


def test_a_reports_own_marker_entry_names_its_process(tmp_path, monkeypatch, capsys):
    """The entry a report writes carries what names its process, and is
    judged running while it is."""
    res = _results(tmp_path / "res", _arm("E1", "on", 20), _arm("E1", "off", 40))
    seen = []
    real_save = hla._save_figure

    def save(fig, path, dpi):
        if not seen:
            entries = hla._marker_entries(str(res / "report" / hla.INCOMPLETE_MARKER))
            seen.extend(entries)
            # (its own process: a report in this process is stopped when another begins)
            assert [e[0] for e in entries] == [os.getpid()]
        real_save(fig, path, dpi)
    monkeypatch.setattr(hla, "_save_figure", save)
    assert main(["report", str(res)]) == 0
    assert seen, "no figure saved"
    line = seen[0][2].splitlines()[-1]
    host, boot, ns = _here()
    assert line == (f"(report {seen[0][1]} on {host}: boot {boot}, pid namespace {ns}, "
                    f"process start {_start(os.getpid())})"), line
    assert not (res / "report" / hla.INCOMPLETE_MARKER).exists()


# ---- text in a script the figure's font lacks ---------------------------------------------

def _installed_font_has(c):
    from matplotlib import font_manager, ft2font
    return any(ord(c) in ft2font.FT2Font(f.fname).get_charmap()
               for f in font_manager.fontManager.ttflist if not f.name.startswith("Last Resort"))


def test_text_no_font_has_is_one_warning_per_figure_naming_its_script(tmp_path, capsys):
    """An arm named in CJK: matplotlib's "Glyph 20869 (\\N{CJK UNIFIED
    IDEOGRAPH-5185}) missing from font(s) DejaVu Sans." was a `heaplab
    report: warning:` line per character and draw (a dozen for one name).
    Now a character another installed font has is drawn with it (font
    fallback: U+02EF, which DejaVu Serif has and DejaVu Sans lacks), and
    the rest is one warning per figure naming it and the characters by
    script."""
    res = _results(tmp_path / "res", _arm("E1", "内存 on", 20), _arm("E1", "off\u02ef", 40))
    capsys.readouterr()
    assert main(["report", str(res)]) == 0
    err = capsys.readouterr().err
    assert "Glyph" not in err, err
    lines = [ln for ln in err.splitlines() if ln.startswith("heaplab report: warning:")]
    out = res / "report"
    if _installed_font_has("内"):
        assert lines == [], err         # (a CJK font installed: drawn with it)
        return
    assert lines == [f"heaplab report: warning: {out / name}: 2 character(s) of its text are in "
                     f"no installed font: CJK ('内存'), drawn as boxes -- install a font that "
                     f"has them (for CJK: Debian's fonts-noto-cjk) and report again"
                     for name in ("E1_footprint.png", "E1_phase_cost.png")], err
