"""One candidate fabric of :func:`flowsolver.design`: its parameters, bill, time and what
they give per USD (see :mod:`flowsolver._design`)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field


@dataclass
class Candidate:
    """One candidate fabric: its parameters, its bill's totals and its workload time.

    ``price`` (USD), ``power`` (W) and ``time`` (s) are NaN where not computed (``price`` and
    ``power`` the whole bill's; :attr:`network_price` and :attr:`network_power` less what the
    servers come with, what the budget and the front read); ``status``
    is ``"ok"``, ``"over budget"``, ``"over power"`` or ``"failed"`` (``message`` says why;
    for an ``"ok"`` fabric whose host ports outnumber the job's NICs, how many stay empty).
    """

    family: str
    link: str
    oversubscription: float
    radix: int
    nics: int
    optics: str
    price: float = math.nan
    power: float = math.nan
    time: float = math.nan
    gpus: int = 0
    switches: int = 0
    status: str = "ok"
    message: str = ""
    pareto: bool = False
    tokens: float = math.nan           # tokens per step (a training workload), NaN otherwise
    gpu_price: float = 0.0             # USD per GPU added to the network bill in ``capex``
    nic_price: float = 0.0             # USD of the bill's compute NICs
    nic_credit: float = 0.0            # USD of them the servers come with (the server's own NICs'
    nics_in_gpu_price: bool = False    # value), left out of the network where they come with them
    own_price: float = 0.0             # USD and W of the bill's parts the servers come with (their
    own_power: float = 0.0             # NICs, so credited; a rack's NVLink switch trays): not network
    lifetime: float = math.nan         # seconds over which ``tokens_per_usd`` counts tokens
    policy: str = "ecmp"               # the routing policy the workload was timed with
    bill: object = field(default=None, repr=False)

    @property
    def tokens_per_s(self) -> float:
        """Training throughput, tokens/s (NaN without tokens per step)."""
        return self.tokens / self.time if self.time > 0 else math.nan

    @property
    def network_price(self) -> float:
        """USD bought for the network: the bill's ``price`` less what the servers come with
        (``own_price``: their own NICs where ``nics_in_gpu_price``, a dearer NIC on the bill paying
        the difference; a rack's NVLink switch trays), what ``budget``, the front and USD/GPU read."""
        return self.price - self.own_price

    @property
    def network_power(self) -> float:
        """W of the network: the bill's ``power`` less its parts the servers come with."""
        return self.power - self.own_power

    @property
    def capex(self) -> float:
        """USD: the network (:attr:`network_price`) plus ``gpus x gpu_price``, which pays for what
        the servers come with (their own NICs where ``nics_in_gpu_price``: not bought twice)."""
        return self.network_price + self.gpus * self.gpu_price

    @property
    def throughput_per_usd(self) -> float:
        """Tokens/s per USD of ``capex``."""
        return self.tokens_per_s / self.capex if self.capex > 0 else math.nan

    @property
    def tokens_per_usd(self) -> float:
        """Tokens trained per USD of ``capex`` over ``lifetime`` seconds (NaN without one)."""
        return self.throughput_per_usd * self.lifetime

    @property
    def capex_time(self) -> float:
        """USD x s: ``capex`` times the workload's ``time``; the least is the most work per USD
        (the order of ``tokens_per_usd`` when every candidate trains the same tokens per step)."""
        return self.capex * self.time

    @property
    def fabric(self) -> tuple:
        """What the time depends on (every parameter but the optics)."""
        return (self.family, self.link, self.oversubscription, self.radix, self.nics)

    def as_dict(self) -> dict:
        return dict(family=self.family, link=self.link, oversubscription=self.oversubscription, radix=self.radix,
                    nics=self.nics, optics=self.optics, gpus=self.gpus, switches=self.switches, price=self.price,
                    power=self.power, network_price=self.network_price, network_power=self.network_power,
                    time=self.time, price_per_gpu=self.price / self.gpus if self.gpus else math.nan,
                    network_price_per_gpu=self.network_price / self.gpus if self.gpus else math.nan,
                    tokens_per_s=self.tokens_per_s, capex=self.capex, nic_price=self.nic_price,
                    nic_credit=self.nic_credit, nics_in_gpu_price=self.nics_in_gpu_price, capex_time=self.capex_time,
                    throughput_per_usd=self.throughput_per_usd, tokens_per_usd=self.tokens_per_usd,
                    policy=self.policy, status=self.status, pareto=self.pareto, message=self.message)
