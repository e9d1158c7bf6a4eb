"""checkov's findings on template.yaml are each fixed or skipped in the resource's Metadata with a reason.

`make checkov` (CI) runs checkov itself from its own environment and fails on any new finding; this test keeps the
skips honest: a known check id, a reason a reviewer can judge, and only on resources that exist.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml

from tests.contract.test_app_contract import ROOT, CfnLoader


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    return yaml.load((ROOT / "template.yaml").read_text(encoding="utf-8"), Loader=CfnLoader)  # type: ignore[no-any-return]


def skips(template: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [
        (name, skip["id"], skip.get("comment", ""))
        for name, resource in template["Resources"].items()
        for skip in resource.get("Metadata", {}).get("checkov", {}).get("skip", [])
    ]


def test_every_checkov_skip_names_a_check_and_gives_a_reason(template: dict[str, Any]) -> None:
    found = skips(template)
    assert found, "template.yaml skips no checkov check: remove this test's premise, or the skips went missing"
    for name, check, reason in found:
        assert re.fullmatch(r"CKV2?_AWS_\d+", check), (name, check)
        assert len(reason.split()) >= 6, f"{name} skips {check} without a reason a reviewer can judge"
    assert len({(name, check) for name, check, _ in found}) == len(found), "a check skipped twice on one resource"


def test_no_skip_hides_a_fixed_posture_item(template: dict[str, Any]) -> None:
    """What issue 24 fixed stays fixed, not skipped: key rotation, TLS to the cluster, bucket policies, IAM auth."""
    fixed = {"CKV_AWS_7", "CKV_AWS_96", "CKV_AWS_162", "CKV_AWS_26", "CKV_AWS_33", "CKV_AWS_23"}
    conditional_rules = {"FunctionSecurityGroup", "ProxySecurityGroup"}  # descriptions inside !If
    skipped = {check for name, check, _ in skips(template) if name not in conditional_rules}
    assert not skipped & fixed
