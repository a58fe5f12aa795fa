"""An arm's stderr is never parsed as its result: warnings, a C library's
messages or a traceback on stderr leave the JSON on stdout intact, and the
tail of stderr is kept beside it (the seed lost a phase's record to a
warning merged into the output it parsed)."""
import json
import sys

from heaplab.harness import run_command_arm

ARM_MODULE = '''
import sys
from heaplab.harness import Experiment

T = Experiment("T", "an arm that writes to stderr")


@T.arm("noisy")
def noisy(rec):
    sys.stderr.write("warning: something on stderr\\n" * 50)
    sys.stderr.flush()
    rec.note("answer", 42)
'''


def test_command_arm_stdout_is_parsed_alone():
    prog = ("import sys, json; sys.stderr.write('noise on stderr\\n' * 50); sys.stderr.flush(); "
            "print(json.dumps({'experiment': 'T', 'arm': 'cmd', 'records': [], 'notes': {'n': 1}}))")
    data = run_command_arm([sys.executable, "-c", prog], label="cmd")
    assert data["notes"] == {"n": 1} and data["returncode"] == 0
    assert "noise on stderr" in data["stderr_tail"]


def test_experiment_arm_writing_to_stderr_keeps_its_record(tmp_path, run_experiment_source):
    res = run_experiment_source("noisy_experiment", ARM_MODULE)
    assert res["noisy"].notes["answer"] == 42
    saved = json.loads((tmp_path / "results" / "T" / "noisy.json").read_text())
    assert saved["notes"]["answer"] == 42 and "something on stderr" in saved["stderr_tail"]
