"""No control switch defaults to the seed's defect, and every experiment's
fixed arm runs on the defaults.

A control switch is an option one of whose values reproduces a defect (or
policy) the seed write-ups found; the option table's description says which
("lifo = the seed's defect").  The switches are read from that table, so a
new one is checked as soon as its description names the seed's value.  A
changed default would otherwise go unnoticed: each switch's own test sets
both values explicitly (issue 22)."""
import os
import re

import heaplab

# "<value> = ... the seed's ..." in an option's description
SEED_VALUE = re.compile(r"(-?\w+) = [^;=]*?\bthe seed's\b")

# Controls whose description does not use those words, with their defect value.
NOT_SAID = {
    "dump_toggle": True,       # bmalloc's pairing: splits the reservation's VMA (E5, E6)
    "upgrade_per_sweep": 0,    # fallback pages never upgraded (E4c)
}

# The switches of DESIGN.md section 7 and issue 16: they must stay found (a
# description edited out of the pattern must not drop its switch silently).
KNOWN = {"page_release", "upgrade_budget_counts", "reuse_failed_order", "syscall_retry_max",
         "quiet_counts_large", "large_pacing", "record_refused_release", "init_page_state",
         "restore_before_format", "dump_toggle", "upgrade_per_sweep"}


def _value(opt, text):
    """The option value a description's word names, in the table's terms."""
    if opt["kind"] == "bool":
        return {"0": False, "1": True, "false": False, "true": True}[text.lower()]
    if opt["kind"] == "enum":
        assert text in opt["choices"], f"{text!r} is not a choice of {opt['choices']}"
        return text
    return int(text)


def control_switches():
    """name -> the value that reproduces the seed's behaviour."""
    table = heaplab.options()
    found = {}
    for name, opt in table.items():
        m = SEED_VALUE.search(opt["description"])
        if m:
            found[name] = _value(opt, m.group(1))
    for name, value in NOT_SAID.items():
        assert name in table, f"option {name} is gone: update NOT_SAID"
        found.setdefault(name, value)
    return found


def test_no_control_switch_defaults_to_the_seeds_defect(monkeypatch):
    for var in list(os.environ):
        if var.startswith("HEAPLAB_"):
            monkeypatch.delenv(var)
    table = heaplab.options()
    switches = control_switches()
    missing = KNOWN - set(switches)
    assert not missing, f"control switches no longer named in the option table: {sorted(missing)}"
    bad = {name: seed for name, seed in switches.items() if table[name]["default"] == seed}
    assert not bad, f"these switches default to the seed's behaviour: {bad}"
    # and a heap made with no options runs on exactly those defaults
    h = heaplab.Heap()
    try:
        applied = h.options
    finally:
        h.close()
    for name in switches:
        assert applied[name] == table[name]["default"], \
            f"{name}: a default heap has {applied[name]!r}, the table says {table[name]['default']!r}"


def test_experiments_fixed_arms_run_on_defaults(repo_experiments):
    """In an experiment with an arm that sets a switch to the seed's value,
    the arms that want the fix leave the switch out: they run on the
    defaults, so a default that drifted to the seed's value shows there too."""
    exps = repo_experiments()
    assert len(exps) >= 6, [e.name for e in exps]
    table = heaplab.options()
    switches = control_switches()
    explicit, varied = [], set()
    for exp in exps:
        studied = {name for arm in exp.arms.values() for name, value in arm["options"].items()
                   if name in switches and value == switches[name]}
        varied |= studied
        for arm_name, arm in exp.arms.items():
            for name in studied & set(arm["options"]):
                if arm["options"][name] == table[name]["default"]:
                    explicit.append(f"{exp.name} {arm_name}: {name}={arm['options'][name]!r}")
    assert not explicit, f"fixed arms that set a switch to its default explicitly: {explicit}"
    assert {"page_release", "quiet_counts_large", "large_pacing", "reuse_failed_order",
            "upgrade_budget_counts", "dump_toggle", "syscall_retry_max"} <= varied, varied
