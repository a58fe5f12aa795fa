"""heaplab.analysis plots read at a glance: an off/on pair told apart in the
VMA plot with several figures, the phase-cost legend clear of the title."""
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg

from heaplab import analysis as hla
from test_analysis import e1_like, e5_like

# no assertion here depends on the machine's load (pyproject.toml's markers)
pytestmark = pytest.mark.shares_the_machine

E5_FIGURES = ("notes.vmas_after_release", "notes.vmas_after_reuse")


def style(line):
    return (line.get_color(), line.get_linestyle(), line.get_marker(),
            line.get_markerfacecolor(), line.get_linewidth())


@pytest.mark.parametrize("figures", [("vmas_after",), E5_FIGURES])
def test_vma_plot_tells_the_control_from_its_treatment(figures):
    """With several figures the line style is the figure's, and off and on
    of a pair had the same colour, marker and style: two identical lines
    per figure (the control's dashes were dropped when len(figures) > 1)."""
    ax = hla.plot_vmas(e5_like(), figures=figures).axes[0]
    lines = {line.get_label().split(" (last")[0]: line for line in ax.get_lines()}
    for f in figures:
        what = "" if len(figures) == 1 else ": " + hla.figure_label(f)
        off, on = lines["off" + what], lines["on" + what]
        assert off.get_color() == on.get_color()          # a pair keeps its colour
        assert style(off) != style(on), (f, style(off))
    if len(figures) > 1:                                  # and the figures stay apart
        on_lines = [style(lines["on: " + hla.figure_label(f)]) for f in figures]
        assert len(set(on_lines)) == len(figures)


def test_phase_cost_legend_is_clear_of_the_title():
    """fig.legend(loc="outside upper center") was drawn on the suptitle."""
    fig = hla.plot_phase_cost(e1_like())
    FigureCanvasAgg(fig).draw()
    renderer = fig.canvas.get_renderer()
    legend = fig.legends[0].get_window_extent(renderer)
    title = fig._suptitle.get_window_extent(renderer)
    assert not legend.overlaps(title), (legend, title)
    for ax in fig.axes:                                   # nor on a panel
        assert not legend.overlaps(ax.get_window_extent(renderer)), (legend, ax)
