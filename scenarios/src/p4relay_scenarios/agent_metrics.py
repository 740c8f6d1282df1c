"""rtpagent's Prometheus metrics as the testbed reads them: its /metrics on the
management network, parsed by prometheus_client, one fetch per snapshot."""

from __future__ import annotations

from dataclasses import dataclass

import httpx
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from p4relay_scenarios import topology

AGENT_METRICS = f"http://{topology.MGMT_RELAY_ADDR}:9102/metrics"


@dataclass(frozen=True, slots=True)
class AgentMetrics:
    samples: tuple[Sample, ...]

    @classmethod
    def read(cls, timeout_s: float = 5.0) -> AgentMetrics:
        text = httpx.get(AGENT_METRICS, timeout=timeout_s).text
        return cls(tuple(s for f in text_string_to_metric_families(text) for s in f.samples))

    def value(self, name: str, **labels: str) -> float | None:
        """The sum of the samples named `name` (`rtpagent_offloads_total`) whose
        labels include `labels`; None when the agent exports none."""
        got = [
            float(s.value)
            for s in self.samples
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())
        ]
        return sum(got) if got else None

    def count(self, name: str, **labels: str) -> float:
        """A labelled counter the agent exports from its first count: 0 before."""
        v = self.value(name, **labels)
        return 0.0 if v is None else v

    def required(self, name: str, **labels: str) -> float:
        """A metric the agent always exports."""
        v = self.value(name, **labels)
        if v is None:
            raise AssertionError(f"rtpagent exports no {name} {labels or ''}".rstrip())
        return v


def agent_metric(name: str, **labels: str) -> float:
    """One metric the agent always exports (summed over the labels not given)."""
    return AgentMetrics.read().required(name, **labels)


def agent_count(name: str, **labels: str) -> float:
    """One counter, 0 until the agent first counts it."""
    return AgentMetrics.read().count(name, **labels)
