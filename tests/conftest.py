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


@pytest.fixture(autouse=True)
def _parts_catalogue_restored():
    """Each test starts from the bill's own catalogue: a part a test or a docs example registers
    (``topologies.register_part``) competes in every later automatic choice otherwise."""
    import importlib

    catalogue = importlib.import_module("topologies.parts")
    parts, chosen = dict(catalogue._PARTS), dict(catalogue._RATE_PART)
    yield
    catalogue._PARTS.clear()
    catalogue._PARTS.update(parts)
    catalogue._RATE_PART.clear()
    catalogue._RATE_PART.update(chosen)
