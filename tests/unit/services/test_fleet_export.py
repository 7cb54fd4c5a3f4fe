"""`fleet --export`: the chosen candidate's Deployment, autoscaler and NodePool, strictly valid (kubernetes-validate
for built-in kinds, the Karpenter v1 CRD schemas for NodePool and EC2NodeClass), bounded by the plan."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from accelbench.deploy.manifests import validate_objects
from accelbench.errors import UserInputError
from accelbench.services.fleet_export import fleet_files, write_fleet_files
from accelbench.services.fleet_plan import fleet_request, plan_fleet
from tests.support.crd import crd_errors

PROFILE = "input_tokens: 512\noutput_tokens: 128\nintervals:\n" + "".join(
    f"  - requests_per_s: {r}\n" for r in (0.2, 0.2, 1.0, 2.5, 1.5, 0.4)
)


@pytest.fixture
def plan(tmp_path: Path):
    traffic = tmp_path / "day.yaml"
    traffic.write_text(PROFILE)
    request = fleet_request(
        traffic=str(traffic),
        model="llama-3.1-8b-instruct",
        slo="ttft:2000,tpot:100",
        instances=["g6.xlarge", "inf2.8xlarge", "m8i.16xlarge"],
    )
    return plan_fleet(None, request)


@pytest.mark.parametrize("which", [None, "inf2.8xlarge"])
def test_exported_objects_are_strictly_valid_and_follow_the_plan(
    plan, tmp_path: Path, which: str | None
) -> None:
    files, _ = fleet_files(plan, instance=which, namespace="serve")
    chosen = plan.candidates[0] if which is None else next(c for c in plan.candidates if c.instance == which)
    written = write_fleet_files(files, tmp_path / "out")
    assert {p.name for p in written} >= {"00-karpenter.yaml", "01-engine.yaml", "fleet-plan.json"}
    objects = [o for name in ("00-karpenter.yaml", "01-engine.yaml") for o in yaml.safe_load_all(files[name])]
    validate_objects(objects, "1.33")
    kinds = sorted(o["kind"] for o in objects)
    assert kinds == ["Deployment", "EC2NodeClass", "HorizontalPodAutoscaler", "NodePool", "Service"]
    by_kind = {o["kind"]: o for o in objects}
    for kind in ("NodePool", "EC2NodeClass"):
        assert crd_errors(by_kind[kind]) == []
    hpa = by_kind["HorizontalPodAutoscaler"]["spec"]
    assert hpa["minReplicas"] == max(1, chosen.min_servers) and hpa["maxReplicas"] == chosen.max_servers
    assert hpa["scaleTargetRef"]["name"] == by_kind["Deployment"]["metadata"]["name"]
    assert hpa["metrics"][0]["pods"]["metric"]["name"] == "vllm_num_requests_waiting"
    assert by_kind["Deployment"]["spec"]["replicas"] == max(1, chosen.min_servers)
    node = by_kind["Deployment"]["spec"]["template"]["spec"]["nodeSelector"][
        "node.kubernetes.io/instance-type"
    ]
    assert node == chosen.instance
    (limit,) = by_kind["NodePool"]["spec"]["limits"].values()
    assert int(limit) >= chosen.max_servers and int(limit) % chosen.max_servers == 0
    assert "vllm:num_requests_waiting" in files["prometheus-adapter.yaml"]


def test_a_candidate_not_in_the_plan_is_refused(plan) -> None:
    with pytest.raises(UserInputError, match="not among the plan's candidates"):
        fleet_files(plan, instance="p5.48xlarge")
