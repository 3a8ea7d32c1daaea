"""Fixtures shared by several test modules."""

import contextlib
import io

import pytest


@pytest.fixture(scope="session")
def main_job(tmp_path_factory):
    """``flowsolver study --quick --out PATH`` once for the whole suite: its printed
    ``text``, the figure path ``out``, ``result`` (what :func:`flowsolver.study.run` returned
    to the command) and that result's entries (``rows``, ``search``, ...)."""
    from flowsolver import study
    from flowsolver.cli import main

    out = tmp_path_factory.mktemp("study") / "study.png"
    results = []
    run = study.run

    def recording_run(**kw):
        results.append(run(**kw))
        return results[-1]

    text = io.StringIO()
    with pytest.MonkeyPatch.context() as mp, contextlib.redirect_stdout(text):
        mp.setattr(study, "run", recording_run)
        assert main(["study", "--quick", "--out", str(out)]) == 0
    return dict(text=text.getvalue(), out=out, result=results[0], **results[0])

