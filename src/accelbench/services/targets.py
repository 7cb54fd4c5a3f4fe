"""The target policy for a remote caller's run spec (the API, the pages): every server it names is checked
before the run is stored, by the rule in ``deploy/target_policy.py``."""

from __future__ import annotations

from accelbench.deploy.target_policy import check_spec_targets, service_policy
from accelbench.domain.run import RunSpec


def check_remote_targets(spec: RunSpec) -> RunSpec:
    """``spec`` when every server it names passes the service's target policy; else a UserInputError."""
    check_spec_targets(spec, service_policy())
    return spec
