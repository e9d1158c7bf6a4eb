"""The idle-reflection schedule as CloudFormation would create it (issue 26 item 5): off by default, on with a
threshold; the sweep runs where and as the retention sweep does and may only read sessions and queue requests."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from tests.contract.expanded_template import PARAMETER_SETS, policy_statements, references, resolve, template_text
from tests.contract.test_app_contract import CfnLoader
from tests.contract.test_deploy_template import refusals

ON = PARAMETER_SETS["idle-reflection"]


def schedule(resources: dict[str, dict[str, Any]]) -> dict[str, Any]:
    (found,) = [
        resource["Properties"]
        for resource in resources.values()
        if resource["Type"] == "AWS::Scheduler::Schedule"
        and references(resource["Properties"]["Target"]["Arn"]) == {"IdleReflectionFunction"}
    ]
    return found


def test_the_schedule_is_disabled_by_default_and_enabled_with_a_threshold() -> None:
    off = schedule(resolve({}))
    assert off["State"] == "DISABLED"
    on = schedule(resolve(ON))
    assert on["State"] == "ENABLED"
    assert on["ScheduleExpression"] == {"Fn::Sub": "rate(${IdleReflectionEveryMinutes} minutes)"}
    assert on["Target"]["RetryPolicy"] == {"MaximumRetryAttempts": 0}


def test_the_sweep_gets_the_stacks_threshold_and_period_and_the_compaction_queue() -> None:
    function = resolve(ON)["IdleReflectionFunction"]["Properties"]
    variables = function["Environment"]["Variables"]
    assert variables["THREADLOOM_IDLE_REFLECTION_MINUTES"] == {"Ref": "IdleReflectionMinutes"}
    assert variables["THREADLOOM_IDLE_REFLECTION_EVERY_MINUTES"] == {"Ref": "IdleReflectionEveryMinutes"}
    assert variables["THREADLOOM_COMPACTION_QUEUE_URL"] == {"Ref": "CompactionQueue"}
    assert variables["POWERTOOLS_SERVICE_NAME"] == "threadloom-idle-reflection"
    assert function["Handler"] == "threadloom_idle_reflection.lambda_handler"


@pytest.mark.parametrize("name", list(PARAMETER_SETS))
def test_the_sweep_runs_where_and_as_the_retention_sweep_does(name: str) -> None:
    resources = resolve(PARAMETER_SETS[name])
    retention, idle = resources["RetentionFunction"]["Properties"], resources["IdleReflectionFunction"]["Properties"]
    same = ("VpcConfig", "Layers", "Runtime", "Architectures", "MemorySize", "TracingConfig", "LoggingConfig")
    assert {key: idle.get(key) for key in same} == {key: retention.get(key) for key in same}
    shared = [key for key in retention["Environment"]["Variables"] if key.startswith("THREADLOOM_DB_")]
    shared += ["THREADLOOM_BACKEND", "POWERTOOLS_METRICS_NAMESPACE"]
    assert {key: idle["Environment"]["Variables"].get(key) for key in shared} == {
        key: retention["Environment"]["Variables"][key] for key in shared
    }
    assert {"Ref": "DatabaseConnectPolicy"} in resources["IdleReflectionFunctionRole"]["Properties"][
        "ManagedPolicyArns"
    ]


def test_the_sweep_may_only_send_to_the_compaction_queue() -> None:
    resources = resolve(ON)
    statements = [
        statement for owner, statement in policy_statements(resources) if owner == "IdleReflectionFunctionRole"
    ]
    allowed = [
        statement for statement in statements if statement.get("Effect") == "Allow" and "Principal" not in statement
    ]
    actions = {
        action
        for statement in allowed
        for action in (statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]])
    }
    assert actions == {"sqs:SendMessage*"}
    named = set().union(*(references(statement.get("Resource")) for statement in allowed))
    assert named == {"CompactionQueue"}, named


def test_the_period_and_threshold_are_bounded() -> None:
    """A rate below 2 minutes would be ``rate(1 minutes)``, which the scheduler refuses."""
    parameters = yaml.load(template_text(), Loader=CfnLoader)["Parameters"]
    assert (parameters["IdleReflectionEveryMinutes"]["MinValue"], parameters["IdleReflectionMinutes"]["MinValue"]) == (
        2,
        0,
    )
    assert parameters["IdleReflectionMinutes"]["Default"] == 0  # off unless asked
    assert refusals(yaml.load(template_text(), Loader=CfnLoader), **ON) == []
