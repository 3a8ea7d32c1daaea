"""Fixtures shared by several test modules."""

import pytest


@pytest.fixture(scope="session")
def quick_study(tmp_path_factory):
    """The main job in quick mode, run once for the whole suite: ``result`` (what
    ``flowsolver.study.run`` returns), ``lines`` (what it printed) and ``figure`` (the PNG)."""
    from flowsolver import study

    figure = tmp_path_factory.mktemp("study") / "study.png"
    lines: list = []
    result = study.run(out=str(figure), quick=True, echo=lines.append)
    return dict(result=result, lines=lines, figure=figure)
