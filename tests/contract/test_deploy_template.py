"""What a deploy creates: database, proxy, network, parameter rules, migrations at deploy time, operations, SnapStart.

Nothing here reaches AWS: the template is read as data (short tags kept as ``Fn::`` mappings) and its parameter
``Rules`` are evaluated by a small interpreter of the functions CloudFormation allows in rules.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
import yaml

from tests.contract.test_app_contract import ROOT, CfnLoader

NO_DATABASE_FUNCTIONS = {"WebSocketAuthorizerFunction", "MigrationsFunction", "LivePublisherFunction"}


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    return yaml.load((ROOT / "template.yaml").read_text(encoding="utf-8"), Loader=CfnLoader)  # type: ignore[no-any-return]


def resources_of(template: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {name: resource for name, resource in template["Resources"].items() if resource["Type"] == kind}


def functions(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return resources_of(template, "AWS::Serverless::Function")


def environment(template: dict[str, Any], name: str) -> dict[str, Any]:
    merged = dict(template["Globals"]["Function"]["Environment"]["Variables"])
    merged.update(template["Resources"][name]["Properties"].get("Environment", {}).get("Variables", {}))
    return merged


def seconds(value: Any) -> float:
    return float(value)


# ------------------------------------------------------------------ rules


def evaluate(expression: Any, parameters: dict[str, Any]) -> Any:
    """CloudFormation's rule functions over concrete parameter values."""
    if not isinstance(expression, dict):
        return expression
    ((name, argument),) = expression.items()
    if name == "Ref":
        return parameters[argument]
    if name == "Fn::Equals":
        left, right = (evaluate(item, parameters) for item in argument)
        return left == right
    if name == "Fn::Not":
        return not evaluate(argument[0], parameters)
    if name == "Fn::And":
        return all(evaluate(item, parameters) for item in argument)
    if name == "Fn::Or":
        return any(evaluate(item, parameters) for item in argument)
    if name == "Fn::Contains":
        members, value = (evaluate(item, parameters) for item in argument)
        return str(value) in [str(member) for member in members]
    if name == "Fn::EachMemberEquals":
        members, value = (evaluate(item, parameters) for item in argument)
        return all(member == value for member in members)
    raise AssertionError(f"rule function {name} is not interpreted here")


def parameters_with(template: dict[str, Any], **given: str) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for name, spec in template["Parameters"].items():
        raw = given.get(name, spec.get("Default"))
        if raw is None:
            raw = {"JwtIssuer": "https://issuer.example.com/", "JwtAudience": "client"}[name]
        if spec.get("AllowedValues") and str(raw) not in [str(value) for value in spec["AllowedValues"]]:
            raise ValueError(f"Parameter {name}: {spec.get('ConstraintDescription', 'not an allowed value')}")
        if spec.get("AllowedPattern") and not re.fullmatch(spec["AllowedPattern"], str(raw)):
            raise ValueError(f"Parameter {name}: {spec.get('ConstraintDescription', 'does not match the pattern')}")
        values[name] = [item.strip() for item in str(raw).split(",")] if spec["Type"] == "CommaDelimitedList" else raw
    return values


def refusals(template: dict[str, Any], **given: str) -> list[str]:
    """The AssertDescription of every failing rule assertion (empty: CloudFormation accepts the set)."""
    values = parameters_with(template, **given)
    failed = []
    for rule in template["Rules"].values():
        if "RuleCondition" in rule and not evaluate(rule["RuleCondition"], values):
            continue
        failed += [item["AssertDescription"] for item in rule["Assertions"] if not evaluate(item["Assert"], values)]
    return failed


def test_the_default_parameters_and_a_complete_bring_your_own_set_are_accepted(template: dict[str, Any]) -> None:
    assert refusals(template) == []
    assert refusals(template, Stage="prod", AlarmEmail="ops@example.com") == []
    own = {
        "CreateDatabase": "false",
        "ExistingDbHost": "mine.proxy-abc.eu-west-1.rds.amazonaws.com",
        "ExistingDbProxyResourceId": "prx-0123456789abcdef0",
        "ExistingVpcId": "vpc-0a1b2c3d",
        "ExistingSubnetIds": "subnet-0a,subnet-0b",
    }
    assert refusals(template, **own) == []


@pytest.mark.parametrize(
    ("given", "named"),
    [
        ({"CreateDatabase": "false"}, "ExistingDbHost"),
        (
            {"CreateDatabase": "false", "ExistingDbHost": "h", "ExistingDbProxyResourceId": "prx-1"},
            "ExistingVpcId",
        ),
        ({"ExistingDbHost": "mine.example.com"}, "CreateDatabase=false"),
        ({"ExistingVpcId": "vpc-0a1b2c3d"}, "ExistingSubnetIds"),
        ({"Stage": "prod"}, "AlarmEmail"),
        # the stack's own VPC has no NAT: direct posts to the Management API would all be lost
        ({"LivePublishing": "direct"}, "LivePublishing=queue"),
        ({"DbMinCapacity": "8", "DbMaxCapacity": "4"}, "DbMinCapacity must not exceed DbMaxCapacity"),
        ({"DbMinCapacity": "256", "DbMaxCapacity": "128"}, "DbMinCapacity must not exceed DbMaxCapacity"),
        ({"PowertoolsLayerArn": "arn:aws:lambda:eu-west-1:017000801446:layer:x:1"}, "only for sam local"),
    ],
)
def test_inconsistent_parameter_sets_are_refused_with_a_message_naming_the_fix(
    template: dict[str, Any], given: dict[str, str], named: str
) -> None:
    messages = refusals(template, **given)
    assert messages, f"{given} was accepted"
    assert any(named in message for message in messages), messages


def test_sqlite_is_refused_as_a_deploy_target_with_the_reason(template: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=r"SQLite is the laptop default.*own copy of the data in /tmp"):
        parameters_with(template, Backend="sqlite")
    assert template["Globals"]["Function"]["Environment"]["Variables"]["THREADLOOM_BACKEND"] == {"Ref": "Backend"}


def test_ordered_capacity_ranges_are_all_accepted(template: dict[str, Any]) -> None:
    steps = template["Parameters"]["DbMaxCapacity"]["AllowedValues"]
    for minimum in template["Parameters"]["DbMinCapacity"]["AllowedValues"]:
        for maximum in steps:
            expected_refused = float(minimum) > float(maximum)
            refused = refusals(template, DbMinCapacity=str(minimum), DbMaxCapacity=str(maximum)) != []
            assert refused == expected_refused, (minimum, maximum)


def test_log_retention_must_be_one_cloudwatch_offers(template: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="a retention CloudWatch Logs offers"):
        parameters_with(template, LogRetentionDays="45")
    assert parameters_with(template, LogRetentionDays="90")["LogRetentionDays"] == "90"


def test_the_jwt_issuer_must_be_an_https_url(template: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="https URL"):
        parameters_with(template, JwtIssuer="cognito-pool")


# ------------------------------------------------------------------ database and proxy


def test_the_stack_creates_aurora_serverless_v2_behind_a_tls_iam_proxy(template: dict[str, Any]) -> None:
    resources = template["Resources"]
    cluster = resources["DatabaseCluster"]
    assert cluster["Condition"] == "CreateDatabase"
    assert cluster["DeletionPolicy"] == "Snapshot"
    props = cluster["Properties"]
    assert props["Engine"] == "aurora-postgresql"
    assert props["StorageEncrypted"] is True
    assert props["ManageMasterUserPassword"] is True
    assert props["MasterUsername"] == {"Ref": "DbMigratorUser"}
    scaling = props["ServerlessV2ScalingConfiguration"]
    assert scaling["MinCapacity"] == {"Ref": "DbMinCapacity"}
    # Auto-pause (0 ACU) does not work with RDS Proxy, so the parameter cannot go below 0.5
    assert min(template["Parameters"]["DbMinCapacity"]["AllowedValues"]) == 0.5
    assert resources["DatabaseWriter"]["Properties"]["DBInstanceClass"] == "db.serverless"

    proxy = resources["DatabaseProxy"]["Properties"]
    assert proxy["RequireTLS"] is True
    assert proxy["EngineFamily"] == "POSTGRESQL"
    assert {auth["IAMAuth"] for auth in proxy["Auth"]} == {"REQUIRED"}
    secrets = [auth["SecretArn"] for auth in proxy["Auth"]]
    assert {"Fn::GetAtt": ["DatabaseCluster", "MasterUserSecret.SecretArn"]} in secrets
    assert {"Ref": "AppUserSecret"} in secrets
    target = resources["DatabaseProxyTargetGroup"]["Properties"]
    assert target["DBClusterIdentifiers"] == [{"Ref": "DatabaseCluster"}]


def test_only_the_functions_reach_the_proxy_and_only_the_proxy_reaches_the_database(template: dict[str, Any]) -> None:
    resources = template["Resources"]
    proxy_ingress = resources["ProxySecurityGroup"]["Properties"]["SecurityGroupIngress"]
    assert [(rule["FromPort"], rule["SourceSecurityGroupId"]) for rule in proxy_ingress] == [
        (5432, {"Ref": "FunctionSecurityGroup"})
    ]
    database_ingress = resources["DatabaseSecurityGroup"]["Properties"]["SecurityGroupIngress"]
    assert [(rule["FromPort"], rule["SourceSecurityGroupId"]) for rule in database_ingress] == [
        (5432, {"Ref": "ProxySecurityGroup"})
    ]
    assert resources["DatabaseProxy"]["Properties"]["VpcSecurityGroupIds"] == [{"Ref": "ProxySecurityGroup"}]
    assert resources["DatabaseCluster"]["Properties"]["VpcSecurityGroupIds"] == [{"Ref": "DatabaseSecurityGroup"}]
    vpc_config = template["Globals"]["Function"]["VpcConfig"]
    assert vpc_config["SecurityGroupIds"] == [{"Ref": "FunctionSecurityGroup"}]


def test_database_functions_connect_as_the_application_role_with_iam_and_never_migrate(
    template: dict[str, Any],
) -> None:
    variables = template["Globals"]["Function"]["Environment"]["Variables"]
    assert variables["THREADLOOM_DB_AUTH"] == "iam"
    assert variables["THREADLOOM_DB_TLS"] == "verify"
    assert variables["THREADLOOM_DB_USER"] == {"Ref": "DbAppUser"}
    assert variables["THREADLOOM_DB_MIGRATE"] == "false"
    assert template["Parameters"]["DbAppUser"]["Default"] != template["Parameters"]["DbMigratorUser"]["Default"]
    connect = template["Resources"]["DatabaseConnectPolicy"]["Properties"]["PolicyDocument"]["Statement"]
    assert [statement["Action"] for statement in connect] == ["rds-db:connect"]
    assert connect[0]["Resource"]["Fn::Sub"][0].endswith(":dbuser:${ProxyId}/${DbAppUser}")
    for name, function in functions(template).items():
        if name in NO_DATABASE_FUNCTIONS:
            continue
        assert {"Ref": "DatabaseConnectPolicy"} in function["Properties"]["Policies"], name


def test_private_subnets_in_two_azs_with_endpoints_and_no_nat(template: dict[str, Any]) -> None:
    resources = template["Resources"]
    zones = [resources[name]["Properties"]["AvailabilityZone"] for name in ("PrivateSubnetA", "PrivateSubnetB")]
    assert [zone["Fn::Select"][0] for zone in zones] == [0, 1]
    kinds = {resource["Type"] for resource in resources.values()}
    assert not kinds & {"AWS::EC2::NatGateway", "AWS::EC2::InternetGateway", "AWS::EC2::EIP"}
    endpoints = {
        resource["Properties"]["ServiceName"]["Fn::Sub"].rsplit(".", 1)[1]: resource["Properties"]
        for resource in resources_of(template, "AWS::EC2::VPCEndpoint").values()
    }
    assert set(endpoints) == {"s3", "dynamodb", "sqs", "secretsmanager", "bedrock-runtime"}
    for service in ("s3", "dynamodb"):
        assert endpoints[service]["VpcEndpointType"] == "Gateway"
    for service in ("sqs", "secretsmanager", "bedrock-runtime"):
        assert endpoints[service]["VpcEndpointType"] == "Interface"
        assert endpoints[service]["PrivateDnsEnabled"] is True
        assert endpoints[service]["SecurityGroupIds"] == [{"Ref": "EndpointSecurityGroup"}]
    ingress = resources["EndpointSecurityGroup"]["Properties"]["SecurityGroupIngress"]
    assert [rule["SourceSecurityGroupId"] for rule in ingress] == [{"Ref": "FunctionSecurityGroup"}]


# ------------------------------------------------------------------ migrations at deploy time


def test_the_migrations_resource_runs_before_the_functions_and_on_every_layer_change(template: dict[str, Any]) -> None:
    resources = template["Resources"]
    migrations = resources["DatabaseMigrations"]
    props = migrations["Properties"]
    assert props["ServiceToken"] == {"Fn::GetAtt": ["MigrationsFunction", "Arn"]}
    assert props["LayerVersion"] == {"Ref": "ThreadloomLayer"}
    assert props["MigratorUser"] == {"Ref": "DbMigratorUser"}
    assert props["AppUser"] == {"Ref": "DbAppUser"}
    assert props["Tls"] == "verify"
    function = resources["MigrationsFunction"]["Properties"]
    assert function["Timeout"] < props["ServiceTimeout"]
    assert (ROOT / function["CodeUri"] / "threadloom_migrations.py").is_file()
    for name in ("ApiFunction", "CompactionFunction"):
        variables = resources[name]["Properties"]["Environment"]["Variables"]
        assert variables["THREADLOOM_DB_SCHEMA_VERSION"] == {"Fn::GetAtt": ["DatabaseMigrations", "SchemaVersion"]}


# ------------------------------------------------------------------ timeouts


def test_database_timeouts_fit_inside_the_api_function_timeout(template: dict[str, Any]) -> None:
    variables = environment(template, "ApiFunction")
    lock, statement = (
        seconds(variables["THREADLOOM_DB_LOCK_TIMEOUT"]),
        seconds(variables["THREADLOOM_DB_STATEMENT_TIMEOUT"]),
    )
    socket, connect = seconds(variables["THREADLOOM_DB_TIMEOUT"]), seconds(variables["THREADLOOM_DB_CONNECT_TIMEOUT"])
    timeout = template["Resources"]["ApiFunction"]["Properties"].get(
        "Timeout", template["Globals"]["Function"]["Timeout"]
    )
    assert lock < statement < socket < timeout
    assert connect < socket
    assert (
        seconds(variables["THREADLOOM_AWS_CONNECT_TIMEOUT"]) + seconds(variables["THREADLOOM_AWS_READ_TIMEOUT"])
        < timeout
    )


def test_the_compaction_function_is_sized_for_a_bedrock_summarizer(template: dict[str, Any]) -> None:
    resources = template["Resources"]
    function = resources["CompactionFunction"]["Properties"]
    variables = environment(template, "CompactionFunction")
    attempts = int(variables["THREADLOOM_BEDROCK_MAX_ATTEMPTS"])
    per_attempt = seconds(variables["THREADLOOM_AWS_CONNECT_TIMEOUT"]) + seconds(
        variables["THREADLOOM_BEDROCK_READ_TIMEOUT"]
    )
    assert attempts * per_attempt + 30 < function["Timeout"]  # 30 s for backoff, the database and the commit
    (event,) = function["Events"].values()
    assert event["Properties"]["BatchSize"] == 1
    queue = resources["CompactionQueue"]["Properties"]
    assert queue["VisibilityTimeout"] >= 6 * function["Timeout"]


# ------------------------------------------------------------------ operations


def alarms(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {name: resource["Properties"] for name, resource in resources_of(template, "AWS::CloudWatch::Alarm").items()}


def alarm_metrics(alarm: dict[str, Any]) -> set[tuple[str, str]]:
    if "MetricName" in alarm:
        return {(alarm["Namespace"], alarm["MetricName"])}
    return {
        (query["MetricStat"]["Metric"]["Namespace"], query["MetricStat"]["Metric"]["MetricName"])
        for query in alarm["Metrics"]
        if "MetricStat" in query
    }


def test_every_alarm_notifies_the_topic_and_the_email_subscription_is_optional(template: dict[str, Any]) -> None:
    for name, alarm in alarms(template).items():
        assert alarm["AlarmActions"] == [{"Ref": "AlarmTopic"}], name
        assert alarm["TreatMissingData"] == "notBreaching", name
    subscription = template["Resources"]["AlarmEmailSubscription"]
    assert subscription["Condition"] == "HasAlarmEmail"
    assert subscription["Properties"]["Endpoint"] == {"Ref": "AlarmEmail"}


def test_alarms_cover_the_dlq_5xx_rate_compaction_failures_and_proxy_saturation(template: dict[str, Any]) -> None:
    found = alarms(template)
    dlq = found["DeadLetterQueueAlarm"]
    assert (dlq["MetricName"], dlq["Threshold"], dlq["ComparisonOperator"]) == (
        "ApproximateNumberOfMessagesVisible",
        0,
        "GreaterThanThreshold",
    )
    assert dlq["Dimensions"][0]["Value"] == {"Fn::GetAtt": ["CompactionDeadLetterQueue", "QueueName"]}
    rate = next(query for query in found["Api5xxRateAlarm"]["Metrics"] if query.get("ReturnData"))
    assert "errors / requests" in rate["Expression"]
    assert alarm_metrics(found["Api5xxRateAlarm"]) == {("AWS/ApiGateway", "5xx"), ("AWS/ApiGateway", "Count")}
    saturation = found["ProxySaturationAlarm"]
    assert alarm_metrics(saturation) == {
        ("AWS/RDS", "DatabaseConnections"),
        ("AWS/RDS", "MaxDatabaseConnectionsAllowed"),
    }


def test_the_compactions_failed_alarm_watches_what_the_compaction_function_emits(template: dict[str, Any]) -> None:
    alarm = alarms(template)["CompactionsFailedAlarm"]
    variables = environment(template, "CompactionFunction")
    assert alarm["Namespace"] == variables["POWERTOOLS_METRICS_NAMESPACE"]
    assert alarm["Dimensions"] == [{"Name": "service", "Value": variables["POWERTOOLS_SERVICE_NAME"]}]
    handler = (ROOT / "functions/compaction/threadloom_compaction.py").read_text(encoding="utf-8")
    assert f'name="{alarm["MetricName"]}"' in handler


def test_every_function_has_error_and_throttle_alarms(template: dict[str, Any]) -> None:
    found = alarms(template)
    for name in functions(template):
        if name == "MigrationsFunction":
            continue  # it answers FAILED to CloudFormation instead of raising: the deploy itself fails
        for metric in ("Errors", "Throttles"):
            alarm = found.get(f"{name}{metric}Alarm")
            assert alarm, f"add {name}{metric}Alarm (copy ApiFunction{metric}Alarm) and list it on the dashboard"
            assert alarm["MetricName"] == metric
            assert alarm["Dimensions"] == [{"Name": "FunctionName", "Value": {"Ref": name}}]


def test_the_dashboard_shows_what_the_alarms_watch(template: dict[str, Any]) -> None:
    body_template, variables = template["Resources"]["Dashboard"]["Properties"]["DashboardBody"]["Fn::Sub"]
    assert "ProxyName" in variables
    body = json.loads(re.sub(r"\$\{[^}]+\}", "x", body_template))
    shown = {
        (line[0], line[1])
        for widget in body["widgets"]
        if widget["type"] == "metric"
        for line in widget["properties"]["metrics"]
        if isinstance(line[0], str)
    }
    for name, alarm in alarms(template).items():
        assert alarm_metrics(alarm) <= shown, name
    (alarm_widget,) = [widget for widget in body["widgets"] if widget["type"] == "alarm"]
    listed = set(re.findall(r"\$\{(\w+)\.Arn\}", body_template)) | {"ProxySaturationAlarm"}
    assert "${ProxySaturationAlarmArn}" in body_template
    assert listed == set(alarms(template)), "the alarm widget lists every alarm"
    assert len(alarm_widget["properties"]["alarms"]) == len(listed)


def test_each_function_reports_under_its_own_service_name(template: dict[str, Any]) -> None:
    names = [environment(template, name).get("POWERTOOLS_SERVICE_NAME") for name in functions(template)]
    assert None not in names
    assert len(set(names)) == len(names)


# ------------------------------------------------------------------ SnapStart and sam local


def test_the_api_function_uses_snapstart_on_published_versions(template: dict[str, Any]) -> None:
    api = template["Resources"]["ApiFunction"]["Properties"]
    assert api["SnapStart"] == {"ApplyOn": "PublishedVersions"}
    assert api["AutoPublishAlias"]
    assert template["Globals"]["Function"]["Runtime"] == "python3.13"  # SnapStart for Python needs 3.12+


def test_no_deployed_function_can_enable_the_sam_local_tenant_override(template: dict[str, Any]) -> None:
    for name in functions(template):
        variables = environment(template, name)
        assert "AWS_SAM_LOCAL" not in variables, name
        # declared empty where sam local may fill it from events/env.local.json, never given a tenant
        assert variables.get("THREADLOOM_LOCAL_TENANT", "") == "", name
