"""cost_study on a cluster other than the article's 64 GPUs: the article's throughput is of
its 64-GPU clusters, so there is no article figure to put beside another size's capital."""

import math

import pytest

import topologies as tp
from flowsolver.study import cost_study, format_costs


def test_article_column_only_for_the_articles_64_gpus():
    gpu = 30000.0
    small = cost_study(nodes=2, networks=("ib_ndr",), global_batch=16, gpu_price=gpu)[0]
    assert small.gpus == 16
    # the article gives 3,800 tokens/s for 64 GPUs, none for 16: not 3,800 over 16 GPUs' capital
    assert math.isnan(small.article_tokens_per_s) and math.isnan(small.article_tokens_per_s_per_musd)
    line = format_costs([small]).splitlines()[1].split()
    assert line[-2:] == ["-", "-"]
    # the model's own figure stays: its tokens/s over this cluster's network bill and 16 GPUs
    # (16 ConnectX-7 in the bill, paid for in the GPU price: left out of the capital)
    nics = 16 * tp.get_part("connectx7_400g").price
    assert small.tokens_per_s_per_musd == pytest.approx(small.tokens_per_s / (small.bill.price - nics + 16 * gpu) * 1e6)
