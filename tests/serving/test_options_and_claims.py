"""serve takes collective_options as training_step does (a CollectiveOptions or a dict), and
the figures docs/serving.md quotes hold under the default compute model (adv14b finding 5)."""

import warnings

import pytest
import topologies as tp

import flowsolver as fs

H, L = 4096, 32          # Llama 3 8B: hidden, layers


@pytest.fixture(scope="module")
def one_server():
    return tp.rail_optimized(nodes=1)


def quiet_serve(*args, **kwargs):
    with warnings.catch_warnings():         # runs of 2 s: only their step tables are read
        warnings.simplefilter("ignore", RuntimeWarning)
        return fs.serve(*args, **kwargs)


def test_collective_options_as_a_record_or_a_dict(one_server):
    kwargs = dict(rate=1.0, duration=2.0, prompt=16, output=4, tp=2)
    # a TP 2 decode step of 2 tokens: 2 x layers all-reduces of 2 x 4096 x 2 bytes, each timed with the
    # options given: 20 us a step (a pure alpha-beta model) instead of NCCL's cost model
    alone = fs.collective(one_server, "all_reduce", 2 * H * 2, ranks=[0, 1], step_latency=20e-6).time
    default = fs.collective(one_server, "all_reduce", 2 * H * 2, ranks=[0, 1], protocol="auto").time
    assert alone > 2 * default                  # the option matters here
    for options in (fs.CollectiveOptions(step_latency=20e-6), {"step_latency": 20e-6}):
        _, comm = quiet_serve(one_server, "llama-3-8b", collective_options=options, **kwargs).decode_step(2, 0)
        assert comm == pytest.approx(2 * L * alone, rel=1e-9)
    # what a step's collectives cannot use is refused by name, as training_step refuses it
    with pytest.raises(ValueError, match="serve does not take CollectiveOptions.channels"):
        quiet_serve(one_server, "llama-3-8b", collective_options=fs.CollectiveOptions(channels=4), **kwargs)
    with pytest.raises(ValueError, match=r"collective_options keys must be among .*got \['polcy'\]"):
        quiet_serve(one_server, "llama-3-8b", collective_options={"polcy": "ecmp"}, **kwargs)


def test_mixtral_one_long_prompt_on_one_rank_with_the_kernel_tables(one_server):
    # Mixtral 8x7B, tp 1 x ep 8 on one DGX H100, the default compute model (kernel tables). By hand
    # (paper's shape): attention projections 2 x 4096 x 32 x (2 x 4096^2 + 2 x 4096 x 1024) = 11.0 TFLOP,
    # causal scores 2 x 4096 x 32 x 4096^2 = 4.4 TFLOP, the rank's 1/8 of the experts' top-2
    # 2 x 4096 x 32 x 2 x 3 x 4096 x 14336 / 8 = 11.5 TFLOP: 26.9 TFLOP on the busiest rank; eight
    # 512-token prompts, one a rank: 11.0 / 8 + 0.07 + 11.5 = 12.9 TFLOP each
    r = quiet_serve(one_server, "mixtral-8x7b", rate=1.0, duration=2.0, prompt=4096, output=4, tp=1, ep=8)
    one, comm1 = r.prefill_step(4096, 1)
    eight, comm8 = r.prefill_step(4096, 8)
    proj = 2 * 4096 * L * (2 * H * H + 2 * H * 1024)
    scores = 2 * 4096 * L * 4096 ** 2
    experts = 2 * 4096 * L * 2 * 3 * H * 14336 / 8
    busiest_one = proj + scores + experts
    busiest_eight = proj / 8 + 2 * 512 * L * 512 ** 2 + experts
    assert busiest_one == pytest.approx(26.9e12, rel=0.01) and busiest_eight == pytest.approx(12.9e12, rel=0.01)
    peak = 989e12                                # H100 SXM dense BF16 (datasheet)
    assert one - comm1 >= busiest_one / peak and eight - comm8 >= busiest_eight / peak
    # the figures docs/serving.md quotes for the default model: ~45 ms and ~19 ms (it said ~57 and ~29,
    # the flat model's)
    assert one - comm1 == pytest.approx(0.045, rel=0.03)
    assert eight - comm8 == pytest.approx(0.019, rel=0.04)


def test_the_h100_pcie_defaults_to_the_flat_model_and_asks_for_hbm_efficiency():
    g = tp.rail_optimized(nodes=1, server="pcie_8gpu")
    kwargs = dict(rate=1.0, duration=2.0, prompt=16, output=4, tp=8)
    with pytest.raises(ValueError, match="no achieved-bandwidth measurement for GPU 'h100_pcie'.*hbm_efficiency="):
        quiet_serve(g, "llama-3-8b", **kwargs)
    # with it, "auto" is the flat model: the same step as compute_efficiency=0.44 (DEFAULT_COMPUTE_EFFICIENCY) given outright
    auto = quiet_serve(g, "llama-3-8b", hbm_efficiency=0.8, **kwargs).decode_step(4, 64)
    flat = quiet_serve(g, "llama-3-8b", hbm_efficiency=0.8, compute_efficiency=0.44, **kwargs).decode_step(4, 64)
    assert auto == flat
