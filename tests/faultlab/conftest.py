from __future__ import annotations

import pytest

from tests.faultlab.hosts import missing
from tests.faultlab.lab import Lab


@pytest.fixture(scope="session")
def lab():
    """The laboratory's network and Redis, for every case of the run; removed at the end,
    whatever happened."""
    why = missing()
    if why:
        pytest.skip(f"the fault laboratory cannot run here: {why}")
    lab = None
    try:
        lab = Lab()
        yield lab
    finally:
        if lab is not None:
            lab.close()
