"""NVLS's own channel count set from Python (nvls_channels=) and from a log's NCCL_NVLS_NCHANNELS /
NCCL_MIN_CTAS / NCCL_MAX_CTAS, as src/transport/nvls.cc ncclNvlsTuning sets comm->nvlsChannels."""

import warnings

import pytest

import flowsolver as fs
import topologies as tp
from flowsolver._nccl_env import log_environment, nvls_channels
from flowsolver.collectives._calibrate_rows import log_settings


def test_fewer_nvls_channels_move_their_share_of_nvlss_bandwidth():
    # NCCL's tuner grants NVLS nChannels x a per-channel rate (tuning.cc); one CTA a channel: 8 of
    # NCCL's 16 on one DGX H100 move half its bus bandwidth at 1 GiB, within the pipeline's fill (its
    # steps shrink with the channels: a few %)
    g = tp.rail_optimized(1)
    own = fs.collective(g, "all_reduce", 1 << 30, algorithm="nvls")
    half = fs.collective(g, "all_reduce", 1 << 30, algorithm="nvls", nvls_channels=8)
    assert own.channels_run == 16 and half.channels_run == 8
    assert half.busbw / own.busbw == pytest.approx(0.5, rel=0.05)
    # more than NCCL's move no more (the switch's rate, not the CTAs, bounds it); the ring is untouched
    more = fs.collective(g, "all_reduce", 1 << 30, algorithm="nvls", nvls_channels=32)
    assert more.time == pytest.approx(own.time, rel=1e-12)
    ring = [fs.collective(g, "all_reduce", 1 << 30, algorithm="ring", nvls_channels=n).time for n in (None, 4)]
    assert ring[0] == ring[1]
    opts = fs.collective(g, "all_reduce", 1 << 30, algorithm="nvls", options=fs.CollectiveOptions(nvls_channels=8))
    assert opts.time == half.time


@pytest.mark.parametrize("bad", [0, -1, 65, 1.5, True, "8"])
def test_a_bad_nvls_channel_count_is_refused_naming_it(bad):
    with pytest.raises(ValueError, match="nvls_channels"):
        fs.collective(tp.rail_optimized(1), "all_reduce", 1 << 20, nvls_channels=bad)


@pytest.mark.parametrize("settings, want", [
    ({}, 16),
    ({"NCCL_NVLS_NCHANNELS": "8"}, 8),
    ({"NCCL_MAX_CTAS": "4"}, 4),                                     # nvls.cc: min(maxCTAs, n)
    ({"NCCL_MIN_CTAS": "24"}, 24),                                   # max(minCTAs, ...)
    ({"NCCL_NVLS_NCHANNELS": "32", "NCCL_MAX_CTAS": "20"}, 20),
    ({"NCCL_NVLS_NCHANNELS": "0"}, 16),                              # <= 0: NCCL's own (config unset)
])
def test_a_logs_settings_give_nccls_nvls_count(settings, want):
    assert nvls_channels(16, log_environment(settings)) == want


def test_a_log_with_max_ctas_runs_nvls_on_that_many_and_says_nothing_unmodelled():
    import pandas as pd

    df = pd.DataFrame({"size": [1 << 20]})
    df.attrs.update(nccl_env={"NCCL_MAX_CTAS": "8"}, source="t.log")
    with warnings.catch_warnings():
        warnings.simplefilter("error")                   # no "not modelled" warning any more
        _, keywords, notes = log_settings(df, "all_reduce", tp.rail_optimized(1), None, ("auto", "auto"))
    # the ring's 24 channels and NVLS's 16, each capped at 8 (connect.cc:498-505, nvls.cc)
    assert keywords == {"channels": 8, "nvls_channels": 8} and notes == []
