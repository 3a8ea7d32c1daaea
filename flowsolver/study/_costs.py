"""The article's cost column, computed: the network bill of each of its 64-GPU clusters
(:func:`topologies.bill`), per GPU, beside the training throughput of the model and of the
article, and the tokens each buys per USD.

The article ranks cost in words only; here every network gets USD per GPU, W per GPU, the
share of the price that rests on estimated (unpublished) part prices, and tokens/s per
million USD of capital (network alone, or network plus GPUs at ``gpu_price``)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import topologies as tp

from .._design_fabrics import nic_credit
from ._article import ARTICLE_GPUS, NETWORKS, cluster, network_study

__all__ = ["CostRow", "cost_study", "format_costs"]



@dataclass(frozen=True)
class CostRow:
    """One network of the article with its bill (USD, W) and throughputs (tokens/s)."""

    network: str
    label: str
    bill: object
    tokens_per_s: float            # the model's
    article_tokens_per_s: float    # the article's (NaN where it gives none)
    gpu_price: float               # USD per GPU in ``capex``
    nics_in_gpu_price: bool = False    # ``gpu_price`` already pays for the bill's compute NICs

    @property
    def gpus(self) -> int:
        return self.bill.gpus

    @property
    def nic_price(self) -> float:
        """USD of the bill's compute NICs."""
        return float(sum(line.price for line in self.bill.lines if line.part.category == "nic"))

    @property
    def nic_credit(self) -> float:
        """USD of the bill's NICs that a server price holding the server's own NICs pays
        (:func:`flowsolver.design`'s rule: each at most the server's own NIC's price)."""
        return nic_credit(self.bill, NETWORKS[self.network][1])

    @property
    def capex(self) -> float:
        """USD: the network bill plus the GPUs at ``gpu_price``, less ``nic_credit`` where the
        GPU price already holds the server's own NICs (a server's price, as the catalogue's
        ``hgx_h100_server``: a dearer NIC on the bill pays the difference)."""
        return self.bill.price + self.gpus * self.gpu_price - (self.nic_credit if self.nics_in_gpu_price else 0.0)

    @property
    def tokens_per_s_per_musd(self) -> float:
        """The model's tokens/s per million USD of ``capex``."""
        return self.tokens_per_s / self.capex * 1e6

    @property
    def article_tokens_per_s_per_musd(self) -> float:
        """The article's tokens/s per million USD of ``capex`` (NaN where it gives no speed)."""
        return self.article_tokens_per_s / self.capex * 1e6


def cost_study(rows=None, *, gpu_price: float = 0.0, nodes: int = 8, networks=("ib_ndr", "ib_hdr", "roce_400g",
                                                                               "eth_100g"),
               gpu_price_includes_nics: bool = True, **study) -> list:
    """Bill the article's clusters and put their throughput per USD beside each other.

    Parameters
    ----------
    rows : list of StudyRow, optional
        :func:`network_study` rows to reuse (their networks); else it is run with ``study``'s
        keywords over ``networks`` (the ideal network has no bill and is left out).
    gpu_price : float
        USD per GPU added to the network bill (``topologies.get_part("hgx_h100_server").price
        / 8`` is a published 8-GPU server figure); 0 prices the network alone.
    gpu_price_includes_nics : bool
        Whether ``gpu_price`` already pays for the compute NICs (a server's price does: the
        catalogue's ``hgx_h100_server`` "includes the infiniband cards"): then ``capex`` credits
        the bill's NICs up to the server's own NICs' value (:func:`flowsolver.design`'s rule).
        No effect when ``gpu_price`` is 0: the study's network cost keeps the NICs, where
        ``design``'s network (``Candidate.network_price``) leaves out what the servers come with.
    nodes : int
        Servers (8 GPUs each) of the cluster, as in :func:`network_study`. The article's
        throughput is of its 64-GPU clusters: on any other size ``article_tokens_per_s`` (and
        its per-USD figure) is NaN, printed ``-``.

    Returns
    -------
    list of CostRow

    Examples
    --------
    >>> from flowsolver.study import network_study
    >>> rows = cost_study(network_study(global_batch=64, networks=("ib_ndr", "eth_100g")))
    >>> ndr, eth = rows
    >>> ndr.bill.price_per_gpu > eth.bill.price_per_gpu      # InfiniBand NDR costs more per GPU
    True
    """
    if isinstance(gpu_price, bool) or not isinstance(gpu_price, (int, float)) or not gpu_price >= 0 \
            or not math.isfinite(gpu_price):
        raise ValueError(f"gpu_price must be a finite number >= 0 (USD per GPU), got {gpu_price!r}")
    if not isinstance(gpu_price_includes_nics, bool):
        raise ValueError(f"gpu_price_includes_nics must be True or False, got {gpu_price_includes_nics!r}")
    if rows is None:
        rows = network_study(nodes=nodes, networks=tuple(n for n in networks if n != "ideal"), **study)
    out = []
    for r in rows:
        if r.network == "ideal":
            continue
        nodes_of_row = r.step.gpus // 8 if r.step.gpus % 8 == 0 else nodes
        b = tp.bill(cluster(r.network, nodes_of_row))
        art = r.article.get("tokens_per_s") if r.step.gpus == ARTICLE_GPUS else None     # the article's size only
        out.append(CostRow(r.network, r.label, b, float(r.step.tokens_per_s), math.nan if art is None else float(art),
                           float(gpu_price), gpu_price > 0 and gpu_price_includes_nics))
    return out


def format_costs(rows) -> str:
    """The cost column as a table: USD and W per GPU, the estimated share of the price, and
    tokens/s per million USD of capital, the model's and the article's.

    >>> from flowsolver.study import network_study
    >>> print(format_costs(cost_study(network_study(global_batch=64, networks=("ib_ndr",)))).splitlines()[0])
    network                       USD/GPU  W/GPU  estimated  tokens/s  per M USD  article  per M USD
    """
    head = (f"{'network':28s} {'USD/GPU':>8s} {'W/GPU':>6s} {'estimated':>10s} {'tokens/s':>9s} {'per M USD':>10s} "
            f"{'article':>8s} {'per M USD':>10s}")
    lines = [head]
    for r in rows:
        art = f"{r.article_tokens_per_s:8.0f}" if math.isfinite(r.article_tokens_per_s) else f"{'-':>8s}"
        art_usd = f"{r.article_tokens_per_s_per_musd:10.1f}" if math.isfinite(r.article_tokens_per_s) else f"{'-':>10s}"
        lines.append(f"{r.label:28s} {r.bill.price_per_gpu:8,.0f} {r.bill.power_per_gpu:6.1f} "
                     f"{r.bill.estimated_share:10.0%} {r.tokens_per_s:9.0f} {r.tokens_per_s_per_musd:10.1f} "
                     f"{art} {art_usd}")
    return "\n".join(lines)
