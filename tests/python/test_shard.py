"""conftest.py's --shard K/N: make test runs the shares_the_machine tests as
two interleaved halves side by side.  Every selected test must be in exactly
one half (a test in neither would never run in make test), and a bad value
is a usage error naming it."""
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.shares_the_machine

HERE = os.path.dirname(os.path.abspath(__file__))
FILES = ["test_shard.py", "test_bad_input.py"]


def collect(*args):
    p = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q",
                        "-p", "no:cacheprovider", *args, *FILES],
                       cwd=HERE, capture_output=True, text=True, timeout=120)
    return p, [line for line in p.stdout.splitlines() if "::" in line]


def test_the_halves_split_the_selection_with_nothing_lost_or_doubled():
    p, whole = collect("-m", "shares_the_machine or not shares_the_machine")
    assert p.returncode == 0, p.stdout + p.stderr
    assert len(whole) > 10
    halves = []
    for k in (1, 2):
        p, half = collect(f"--shard={k}/2")
        assert p.returncode == 0, p.stdout + p.stderr
        halves.append(half)
    assert not set(halves[0]) & set(halves[1])
    assert sorted(halves[0] + halves[1]) == sorted(whole)
    # interleaved, so a slow file's tests go to both halves
    assert halves[0] == whole[0::2] and halves[1] == whole[1::2]
    # one part is the whole selection
    p, one = collect("--shard=1/1")
    assert one == whole


@pytest.mark.parametrize("spec, says", [
    ("3/2", "K must be from 1 to N (2)"),
    ("1/0", "N must be 1 or more"),
    ("x", "expected K/N, two whole numbers"),
    ("-1/2", "expected K/N, two whole numbers"),
])
def test_a_bad_shard_is_a_usage_error_naming_it(spec, says):
    p, _ = collect(f"--shard={spec}")
    assert p.returncode == pytest.ExitCode.USAGE_ERROR, p.stdout + p.stderr
    assert f"--shard {spec!r}: {says}" in p.stderr
