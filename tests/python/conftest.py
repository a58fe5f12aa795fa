import pytest

import heaplab


@pytest.fixture
def heap():
    h = heaplab.Heap()
    yield h
    h.close()
