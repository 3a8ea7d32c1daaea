"""docs/design.md's "The article's size recommendations, searched" at 64 GPUs: the search
benchmarks/article_sizes.py runs (fat-tree, leaf-spine, rail-optimised and DragonFly+; NDR and
RoCE 400G; 1:1 and 2:1; a Llama-3-70B step TP8 PP4; GPUs at the catalogue's server price over 8;
30 days) gives the row the page prints. The page's table went stale twice without a test (the
DragonFly+ sizing and RoCE's headers on 2026-12-07 were re-run by hand; the DP contention charge
of the same day was not). 256 GPUs and up take tens of seconds each and are left to
benchmarks/article_sizes.py."""

import math
import re
from pathlib import Path

import pytest

import topologies as tp
from flowsolver import design

PAGE = Path(__file__).resolve().parents[2] / "docs" / "design.md"
DAYS_30 = 30 * 86400.0


@pytest.fixture(scope="module")
def sixty_four():
    gpu = tp.get_part("hgx_h100_server").price / 8
    assert gpu == 38750.0                                   # the page's "GPUs at 38,750 USD"
    r = design(64, dict(model="llama-3-70b", tp=8, pp=4),
               families=("fat_tree", "leaf_spine", "rail_optimized", "dragonfly_plus"),
               links=("ib_ndr", "roce_400g"), oversubscriptions=(1.0, 2.0), optics=("multimode",),
               gpu_price=gpu, lifetime=DAYS_30)
    return [c for c in r.candidates if c.status == "ok" and math.isfinite(c.tokens_per_usd)]


def _text():
    return " ".join(PAGE.read_text().split())


def test_the_64_gpu_row_of_the_size_table(sixty_four):
    ok = sixty_four
    best = max(ok, key=lambda c: c.tokens_per_usd)
    # one 64-port switch holds the 64 NICs: the fat-tree family's one-switch build, on RoCE 400G
    assert (best.family, best.link, best.oversubscription) == ("fat_tree", "roce_400g", 1.0)

    def top(**kw):
        return max((c for c in ok if all(getattr(c, k) == v for k, v in kw.items())),
                   key=lambda c: c.tokens_per_usd).tokens_per_usd

    said = (f"| 64 | fat-tree (one switch) RoCE 400G 1:1, {best.tokens_per_usd:,.0f} | "
            f"{best.price / best.gpus:,.0f} | {top(family='dragonfly_plus'):,.0f} | "
            f"{top(family='rail_optimized'):,.0f} | {top(link='ib_ndr'):,.0f} |")
    assert said in _text(), said


def test_the_64_gpu_row_of_the_fat_tree_table(sixty_four):
    ft = max((c for c in sixty_four if c.family == "fat_tree" and c.link == "roce_400g"),
             key=lambda c: c.tokens_per_usd)
    # tokens per USD is the step's tokens over its time, over 30 days, per USD of capex
    assert ft.tokens_per_usd == pytest.approx(ft.tokens_per_s * DAYS_30 / ft.capex, rel=1e-12)
    said = (f"| 64 | one switch | 64 of 64 | {ft.price / ft.gpus:,.0f} | {ft.tokens_per_usd:,.0f} | "
            f"{ft.time:.3f} |")
    assert said in _text(), said
    m = re.search(r"At 64 GPUs one 64-port switch holds every NIC and buys the most tokens \((\d+) % more than the "
                  r"2:1 leaf-spine", _text())
    assert m, "the page no longer compares the one switch with the 2:1 leaf-spine at 64 GPUs"
    ls = max((c for c in sixty_four if c.family == "leaf_spine" and c.oversubscription == 2.0),
             key=lambda c: c.tokens_per_usd)
    assert m.group(1) == f"{(ft.tokens_per_usd / ls.tokens_per_usd - 1) * 100:.0f}"
