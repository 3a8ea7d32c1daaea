"""Most serving tests run a second or two of requests only to read the step tables: the
warning that such a run is short of steady state (adv14b finding 2) is expected there.
``pytest.warns`` still sees it where a test checks it (tests/serving/test_steady.py)."""

import pytest


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/serving/" in str(item.fspath).replace("\\", "/"):
            item.add_marker(pytest.mark.filterwarnings("ignore:serve. duration .* steady state:RuntimeWarning"))
