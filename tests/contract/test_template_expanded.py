"""The SAM-expanded template, for every parameter set the docs offer: what CloudFormation and IAM would receive.

A first review of the stack read the template as written; its defects only showed once SAM had expanded it and a
parameter set had picked the branches (a Secrets Manager statement whose Resource was AWS::NoValue, an API
version that a layer change never replaced, a custom resource deleted after the network it answers through).
These tests read that output (tests/contract/expanded_template.py) and lint it.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.contract.expanded_template import (
    BEDROCK_MODEL,
    PARAMETER_SETS,
    ROOT,
    YOUR_DATABASE,
    YOUR_VPC,
    dependencies,
    expand,
    policy_statements,
    references,
    resolve,
    template_text,
)
from tests.contract.test_deploy_template import refusals

SETS = list(PARAMETER_SETS)
CREATED_VPC_SETS = [name for name in SETS if "ExistingVpcId" not in PARAMETER_SETS[name]]


def of_type(resources: dict[str, dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {name: resource for name, resource in resources.items() if resource["Type"] == kind}


def version_ids(expanded: dict[str, Any]) -> list[str]:
    return sorted(name for name in of_type(expanded["Resources"], "AWS::Lambda::Version") if "ApiFunction" in name)


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    import yaml

    from tests.contract.test_app_contract import CfnLoader

    return yaml.load(template_text(), Loader=CfnLoader)  # type: ignore[no-any-return]


# ------------------------------------------------------------------ every offered shape deploys


@pytest.mark.parametrize("name", SETS)
def test_every_offered_parameter_set_passes_the_rules(template: dict[str, Any], name: str) -> None:
    assert refusals(template, **PARAMETER_SETS[name]) == []


@pytest.mark.parametrize("name", SETS)
def test_the_expanded_template_passes_cfn_lint_with_the_serverless_rules(name: str, tmp_path: Path) -> None:
    """Linted as CloudFormation receives it, informational findings (DeletionPolicy...) included."""
    expanded = expand(PARAMETER_SETS[name])
    for parameter, value in PARAMETER_SETS[name].items():  # the set's values, so value checks see them
        spec = expanded["Parameters"][parameter]
        spec["Default"] = float(value) if spec["Type"] == "Number" and "." in value else value
        if spec["Type"] == "Number" and "." not in value:
            spec["Default"] = int(value)
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(expanded, indent=1), encoding="utf-8")
    cfn_lint = shutil.which("cfn-lint", path=str(Path(sys.executable).parent)) or shutil.which("cfn-lint")
    assert cfn_lint, "cfn-lint is not installed"
    command = [cfn_lint, "--config-file", str(ROOT / ".cfnlintrc"), "--include-checks", "I"]
    command += ["--non-zero-exit-code", "informational", "--", str(path)]
    result = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("name", SETS)
def test_every_iam_statement_has_an_effect_an_action_and_a_resource(name: str) -> None:
    """IAM refuses a whole policy (MalformedPolicyDocument) for one statement without a Resource."""
    resources = resolve(PARAMETER_SETS[name])
    statements = policy_statements(resources)
    assert len(statements) > 20
    for owner, statement in statements:
        assert statement.get("Effect") in ("Allow", "Deny"), (owner, statement)
        assert statement.get("Action"), (owner, statement)
        if "Principal" not in statement:  # identity policies name what they apply to
            assert statement.get("Resource") not in (None, "", []), (owner, statement)
    assert "AWS::NoValue" not in json.dumps(resources)


def test_your_database_without_a_migrator_secret_grants_no_secret_at_all() -> None:
    migrator = resolve(PARAMETER_SETS["your-database-iam-migrator"])["MigrationsFunctionRole"]
    assert "secretsmanager" not in json.dumps(migrator)
    with_secret = resolve(PARAMETER_SETS["your-database-migrator-secret"])["MigrationsFunctionRole"]
    assert '"Ref": "ExistingDbMigratorSecretArn"' in json.dumps(with_secret)


# ------------------------------------------------------------------ the API runs the code that was shipped


def test_a_layer_only_change_publishes_a_new_api_version() -> None:
    before, after = expand({}), expand({}, layer="layer-with-one-more-migration")
    assert version_ids(before) != version_ids(after)
    (version,) = version_ids(after)
    alias = after["Resources"]["ApiFunctionAliaslive"]["Properties"]
    assert alias["FunctionVersion"] == {"Fn::GetAtt": [version, "Version"]}


def test_a_new_powertools_release_publishes_a_new_api_version() -> None:
    from importlib.metadata import version

    pinned = version("aws-lambda-powertools")
    text = template_text()
    assert text.count(f"python3.13/{pinned}}}}}") == 1
    newer = text.replace(f"python3.13/{pinned}}}}}", "python3.13/99.0.0}}")
    assert version_ids(expand({})) != version_ids(expand({}, text=newer))


def test_a_property_change_publishes_a_new_api_version() -> None:
    text = template_text()
    changed = text.replace("      Description: Threadloom HTTP API\n", "      Description: Threadloom HTTP API v2\n")
    assert changed != text
    assert version_ids(expand({})) != version_ids(expand({}, text=changed))


def test_a_replaced_api_version_is_deleted_once_the_alias_has_moved() -> None:
    """SnapStart bills the snapshot cache of every version kept, so a deploy must not leave the old one behind."""
    resources = expand({})["Resources"]
    (version,) = version_ids(expand({}))
    assert resources[version]["DeletionPolicy"] == "Delete"


def test_the_low_cost_shape_puts_the_interface_endpoints_in_one_zone() -> None:
    development = resolve(PARAMETER_SETS["low-cost-development"])
    default = resolve({})
    for name in ("SqsEndpoint", "SecretsManagerEndpoint"):
        assert development[name]["Properties"]["SubnetIds"] == [{"Ref": "PrivateSubnetA"}]
        assert len(default[name]["Properties"]["SubnetIds"]) == 2


def test_every_route_calls_the_published_alias_under_one_permission() -> None:
    """One permission for the whole API: SAM's one per route event filled the function's 20 KB resource policy."""
    resources = expand({})["Resources"]
    paths = resources["HttpApi"]["Properties"]["Body"]["paths"]
    routes = [method for path, methods in paths.items() if path != "/mcp" for method in methods.values()]
    assert len(routes) >= 40
    for route in routes:
        uri = route["x-amazon-apigateway-integration"]["uri"]["Fn::Sub"]
        assert uri.endswith("/functions/${ApiFunction.Arn}:live/invocations")
    assert "ApiFunctionAliaslive" in resources  # the alias the routes name, published by AutoPublishAlias: live
    (permission,) = [
        resource["Properties"]
        for resource in of_type(resources, "AWS::Lambda::Permission").values()
        if "ApiFunction" in json.dumps(resource["Properties"]["FunctionName"])
    ]
    assert permission["FunctionName"] == {"Ref": "ApiFunctionAliaslive"}
    assert permission["SourceArn"] == {
        "Fn::Sub": "arn:${AWS::Partition}:execute-api:${AWS::Region}:${AWS::AccountId}:${HttpApi}/*"
    }


def test_routes_without_their_own_security_get_the_jwt_authorizer() -> None:
    paths = expand({})["Resources"]["HttpApi"]["Properties"]["Body"]["paths"]
    security = {
        (method, path): route["security"] for path, methods in paths.items() for method, route in methods.items()
    }
    public = {key for key, value in security.items() if value == [{"NONE": []}]}
    assert public == {("get", "/health"), ("get", "/openapi.json"), ("get", "/"), ("get", "/inspector/{asset}")}
    erasures = {("post", "/subjects/{subjectId}/erase"), ("post", "/subjects/erase")}
    assert all(security[key] == [{"JwtAuthorizer": [{"Ref": "AdminScope"}]}] for key in erasures)
    others = set(security) - public - erasures
    assert all(security[key] == [{"JwtAuthorizer": []}] for key in others)


# ------------------------------------------------------------------ /mcp on its own function


def test_mcp_calls_the_mcp_functions_alias_behind_the_jwt_authorizer_under_its_own_permission() -> None:
    resources = expand({})["Resources"]
    paths = resources["HttpApi"]["Properties"]["Body"]["paths"]
    assert list(paths["/mcp"]) == ["post"]  # stateless JSON: no GET stream, no DELETE of a session
    route = paths["/mcp"]["post"]
    uri = route["x-amazon-apigateway-integration"]["uri"]["Fn::Sub"]
    assert uri.endswith("/functions/${McpFunction.Arn}:live/invocations")
    assert route["x-amazon-apigateway-integration"]["payloadFormatVersion"] == "2.0"
    assert route["security"] == [{"JwtAuthorizer": []}]  # the same authorizer as every private route
    assert "McpFunctionAliaslive" in resources
    (permission,) = [
        resource["Properties"]
        for resource in of_type(resources, "AWS::Lambda::Permission").values()
        if "McpFunction" in json.dumps(resource["Properties"]["FunctionName"])
    ]
    assert permission["FunctionName"] == {"Ref": "McpFunctionAliaslive"}
    assert permission["SourceArn"] == {
        "Fn::Sub": "arn:${AWS::Partition}:execute-api:${AWS::Region}:${AWS::AccountId}:${HttpApi}/*/*/mcp"
    }


@pytest.mark.parametrize("name", SETS)
def test_the_mcp_function_runs_where_and_as_the_api_function_does(name: str) -> None:
    resources = resolve(PARAMETER_SETS[name])
    api, mcp = resources["ApiFunction"]["Properties"], resources["McpFunction"]["Properties"]
    same = ("VpcConfig", "Layers", "Runtime", "Architectures", "MemorySize", "Timeout", "TracingConfig")
    assert {key: mcp.get(key) for key in same} == {key: api.get(key) for key in same}
    assert mcp["SnapStart"] == api["SnapStart"] == {"ApplyOn": "PublishedVersions"}
    assert mcp["LoggingConfig"] == api["LoggingConfig"]
    assert mcp["Handler"] == "threadloom_mcp.lambda_handler"
    assert mcp.get("ReservedConcurrentExecutions") == api.get("ReservedConcurrentExecutions")
    api_variables, mcp_variables = api["Environment"]["Variables"], mcp["Environment"]["Variables"]
    shared = [key for key in api_variables if key.startswith(("THREADLOOM_DB_", "THREADLOOM_LIVE_"))]
    shared += ["THREADLOOM_BACKEND", "THREADLOOM_TENANT_CLAIM", "THREADLOOM_SKILLS_BUCKET", "THREADLOOM_PROMPT_TABLE"]
    shared += ["THREADLOOM_COMPACTION_QUEUE_URL", "THREADLOOM_CONNECTIONS_TABLE", "POWERTOOLS_METRICS_NAMESPACE"]
    assert {key: mcp_variables.get(key) for key in shared} == {key: api_variables[key] for key in shared}
    assert mcp_variables["POWERTOOLS_SERVICE_NAME"] == "threadloom-mcp"
    role = resources["McpFunctionRole"]["Properties"]
    assert {"Ref": "DatabaseConnectPolicy"} in role["ManagedPolicyArns"]


def test_the_mcp_function_may_do_what_the_mcp_tools_do_and_no_more() -> None:
    """No idempotency records, exports, imports or erasure over MCP; prompts and subscribers: read or written."""
    resources = resolve({})
    statements = [statement for owner, statement in policy_statements(resources) if owner == "McpFunctionRole"]
    actions = {
        action
        for statement in statements
        if statement.get("Effect") == "Allow" and "Principal" not in statement
        for action in (statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]])
    }
    reads = {"s3:GetObject", "s3:ListBucket", "s3:GetBucketLocation", "s3:GetObjectVersion"}
    assert actions == {*reads, "s3:GetLifecycleConfiguration", "dynamodb:GetItem", "dynamodb:PutItem"} | {
        "dynamodb:Query",
        "sqs:SendMessage*",  # the compaction queue and the live-events queue (SAM's SQSSendMessagePolicy)
    }
    named = set().union(*(references(statement.get("Resource")) for statement in statements))
    assert named.isdisjoint({"IdempotencyTable", "ExportBucket"}), named
    for action in ("dynamodb:DeleteItem", "dynamodb:Scan", "dynamodb:BatchWriteItem", "s3:PutObject"):
        assert action not in actions, action


# ------------------------------------------------------------------ deletion and rollback


@pytest.mark.parametrize("name", CREATED_VPC_SETS)
def test_the_migrations_resource_is_removed_before_the_network_it_answers_through(name: str) -> None:
    """In a VPC without NAT the function answers CloudFormation's S3 URL through the gateway endpoint only."""
    resources = resolve(PARAMETER_SETS[name])
    needed = dependencies(resources, "DatabaseMigrations")
    network = {
        "S3Endpoint",
        "PrivateRouteTable",
        "PrivateSubnetARouteTable",
        "PrivateSubnetBRouteTable",
        "PrivateSubnetA",
        "PrivateSubnetB",
        "FunctionSecurityGroup",
        "SecretsManagerEndpoint",
        "EndpointSecurityGroup",
        "Vpc",
    }
    assert network <= needed, f"add to DatabaseMigrations' Network property: {sorted(network - needed)}"
    assert {"MigrationsFunction", "MigrationsFunctionRole"} <= needed
    if "DatabaseProxy" in resources:
        assert {"DatabaseProxyTargetGroup", "FunctionToProxyEgress", "DatabaseWriter"} <= needed


# ------------------------------------------------------------------ alarms reach someone


@pytest.mark.parametrize("name", SETS)
def test_every_alarm_notifies_a_topic_cloudwatch_can_publish_to(name: str) -> None:
    resources = resolve(PARAMETER_SETS[name])
    alarms = of_type(resources, "AWS::CloudWatch::Alarm")
    assert len(alarms) >= 17
    for alarm_name, alarm in alarms.items():
        actions = alarm["Properties"]["AlarmActions"] + alarm["Properties"].get("OKActions", [])
        for action in actions:
            (topic_name,) = references(action)
            topic = resources[topic_name]["Properties"]
            key = topic.get("KmsMasterKeyId")
            if key is None:
                continue
            assert isinstance(key, dict), f"{alarm_name}: {key} (an AWS-managed key) cannot be used by CloudWatch"
            (key_name,) = references(key)
            policy = resources[key_name]["Properties"]["KeyPolicy"]["Statement"]
            granted = {
                action
                for statement in policy
                if statement["Effect"] == "Allow"
                and statement["Principal"].get("Service") == "cloudwatch.amazonaws.com"
                for action in statement["Action"]
            }
            assert {"kms:Decrypt", "kms:GenerateDataKey*"} <= granted, alarm_name


# ------------------------------------------------------------------ API Gateway's account logging role


def test_websocket_access_logs_wait_for_the_account_logging_role_the_stack_creates() -> None:
    resources = resolve({})
    account = resources["ApiGatewayAccount"]
    assert account["Properties"]["CloudWatchRoleArn"] == {"Fn::GetAtt": ["ApiGatewayCloudWatchRole", "Arn"]}
    assert account["DeletionPolicy"] == "Retain"  # an account-wide setting other stacks may rely on
    role = resources["ApiGatewayCloudWatchRole"]["Properties"]
    assert role["ManagedPolicyArns"][0]["Fn::Sub"].endswith("/AmazonAPIGatewayPushToCloudWatchLogs")
    assert "ApiGatewayAccount" in dependencies(resources, "WebSocketStage")
    assert resources["WebSocketStage"]["Properties"]["AccessLogSettings"]["DestinationArn"]


def test_an_account_that_has_its_role_keeps_it_and_none_turns_websocket_access_logs_off() -> None:
    existing = resolve({"ApiGatewayLoggingRole": "existing"})
    assert not of_type(existing, "AWS::ApiGateway::Account")
    assert existing["WebSocketStage"]["Properties"]["AccessLogSettings"]["DestinationArn"]
    none = resolve({"ApiGatewayLoggingRole": "none"})
    assert not of_type(none, "AWS::ApiGateway::Account")
    assert "AccessLogSettings" not in none["WebSocketStage"]["Properties"]
    assert "WebSocketAccessLogs" not in none


# ------------------------------------------------------------------ quotas, names, optional parts


def test_no_concurrency_is_reserved_unless_asked() -> None:
    for resource in of_type(resolve({}), "AWS::Lambda::Function").values():
        assert "ReservedConcurrentExecutions" not in resource["Properties"]
    reserved = resolve({"ReservedConcurrency": "true"})
    assert reserved["CompactionFunction"]["Properties"]["ReservedConcurrentExecutions"] == 10
    assert reserved["RetentionFunction"]["Properties"]["ReservedConcurrentExecutions"] == 1


# Names the stack derives from its own name, and the longest each may be.
NAME_LIMITS = {
    ("AWS::ApiGatewayV2::Api", "Name"): 128,
    ("AWS::CloudWatch::Dashboard", "DashboardName"): 255,
    ("AWS::EC2::VPC", "Tags"): 256,
    ("AWS::EC2::Subnet", "Tags"): 256,
}


def test_no_fixed_name_outgrows_its_limit_with_the_longest_stack_name() -> None:
    stack_name = "s" * 128
    for parameter_set in PARAMETER_SETS.values():
        for name, resource in resolve(parameter_set).items():
            for key, value in resource.get("Properties", {}).items():
                text = json.dumps(value)
                if "AWS::StackName" not in text or key in ("Description", "DashboardBody", "Body"):
                    continue
                limit = NAME_LIMITS.get((resource["Type"], key))
                assert limit, f"{name}.{key} grows with the stack name: give it a limit here, or let AWS name it"
                longest = len(re.sub(r"\$\{AWS::StackName\}|\{\"Ref\": \"AWS::StackName\"\}", stack_name, text))
                assert longest - 2 <= limit or key == "Tags", f"{name}.{key}"
    proxy_name = resolve({})["DatabaseProxy"]["Properties"]["DBProxyName"]["Fn::Sub"]
    assert proxy_name[0] == "threadloom-${StackIdPart}" and len("threadloom-") + 8 <= 60


def test_the_bedrock_endpoint_and_permission_come_only_with_a_bedrock_summarizer() -> None:
    offline = resolve({})
    assert "BedrockRuntimeEndpoint" not in offline
    assert "bedrock:InvokeModel" not in json.dumps(offline["CompactionFunctionRole"])
    bedrock = resolve({"SummarizerModelArn": BEDROCK_MODEL})
    assert bedrock["BedrockRuntimeEndpoint"]["Properties"]["ServiceName"]["Fn::Sub"].endswith(".bedrock-runtime")
    assert "bedrock:InvokeModel" in json.dumps(bedrock["CompactionFunctionRole"])


def test_every_function_that_reads_the_database_waits_for_the_schema() -> None:
    resources = resolve({})
    for name, resource in of_type(resources, "AWS::Lambda::Function").items():
        if "DatabaseConnectPolicy" in json.dumps(resources[f"{name}Role"]):
            variables = resource["Properties"]["Environment"]["Variables"]
            assert variables.get("THREADLOOM_DB_SCHEMA_VERSION") == {
                "Fn::GetAtt": ["DatabaseMigrations", "SchemaVersion"]
            }, name


# ------------------------------------------------------------------ least privilege


def test_the_functions_get_object_actions_on_the_export_bucket_never_its_settings() -> None:
    resources = resolve({})
    for owner, statement in policy_statements(resources):
        if "ExportBucket" not in json.dumps(statement.get("Resource")) or "Principal" in statement:
            continue
        actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        assert set(actions) <= {"s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:ListBucket"}, owner
        if "s3:ListBucket" in actions:
            assert statement["Condition"] == {"StringLike": {"s3:prefix": "exports/*"}}, owner
        else:
            assert re.search(r"/(exports|imports)/\*$", statement["Resource"]["Fn::Sub"]), owner


def test_table_wide_reads_and_batch_writes_only_where_the_code_needs_them() -> None:
    """No Scan anywhere (erasure reads a session's idempotency index by its key); BatchWriteItem: gone
    connections are forgotten."""
    needs: dict[str, set[str]] = {"dynamodb:Scan": set(), "dynamodb:BatchWriteItem": {"ConnectionsTable"}}
    for owner, statement in policy_statements(resolve({})):
        actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        assert "dynamodb:*" not in actions, owner
        for action, tables in needs.items():
            if action in actions:
                assert references(statement["Resource"]) <= tables, (owner, statement)


@pytest.mark.parametrize("name", SETS)
def test_no_security_group_keeps_the_default_allow_all_egress(name: str) -> None:
    resources = resolve(PARAMETER_SETS[name])
    for group_name, group in of_type(resources, "AWS::EC2::SecurityGroup").items():
        egress = group["Properties"].get("SecurityGroupEgress")
        assert egress, f"{group_name}: without SecurityGroupEgress, EC2 allows everything out"
        for rule in egress:
            assert rule["IpProtocol"] != "-1" or rule["CidrIp"] == "127.0.0.1/32", group_name
    for group_name in ("DatabaseSecurityGroup", "EndpointSecurityGroup"):
        if group_name in resources:
            (rule,) = resources[group_name]["Properties"]["SecurityGroupEgress"]
            assert rule["CidrIp"] == "127.0.0.1/32", f"{group_name} needs nothing out"
    if "DatabaseProxy" in resources:
        egress = resources["FunctionSecurityGroup"]["Properties"]["SecurityGroupEgress"]
        assert {rule["FromPort"] for rule in egress} == {443}  # PostgreSQL only to the proxy, below
        to_proxy = resources["FunctionToProxyEgress"]["Properties"]
        assert to_proxy["DestinationSecurityGroupId"] == {"Ref": "ProxySecurityGroup"}
        to_cluster = resources["ProxyToDatabaseEgress"]["Properties"]
        assert to_cluster["DestinationSecurityGroupId"] == {"Ref": "DatabaseSecurityGroup"}


def test_given_the_prefix_lists_https_goes_only_to_the_endpoints() -> None:
    resources = resolve(PARAMETER_SETS["narrow-https-egress"])
    egress = resources["FunctionSecurityGroup"]["Properties"]["SecurityGroupEgress"]
    assert [rule.get("DestinationPrefixListId") for rule in egress] == [
        {"Ref": "S3PrefixListId"},
        {"Ref": "DynamoDbPrefixListId"},
    ]
    assert not any(rule.get("CidrIp") == "0.0.0.0/0" for rule in egress)
    to_endpoints = resources["FunctionToEndpointsEgress"]["Properties"]
    assert to_endpoints["DestinationSecurityGroupId"] == {"Ref": "EndpointSecurityGroup"}
    (proxy_rule,) = resources["ProxySecurityGroup"]["Properties"]["SecurityGroupEgress"]
    assert proxy_rule["CidrIp"] == "127.0.0.1/32"
    assert resources["ProxyToEndpointsEgress"]["Properties"]["DestinationSecurityGroupId"] == {
        "Ref": "EndpointSecurityGroup"
    }
    assert "FunctionToEndpointsEgress" in dependencies(resources, "DatabaseMigrations")


def test_prefix_lists_come_together_and_only_with_the_stacks_vpc(template: dict[str, Any]) -> None:
    assert refusals(template, S3PrefixListId="pl-6da54004") != []
    assert refusals(template, S3PrefixListId="pl-1", DynamoDbPrefixListId="pl-2", **YOUR_VPC) != []


def test_the_cluster_forces_tls_on_every_connection() -> None:
    resources = resolve({})
    group = resources["DatabaseClusterParameterGroup"]["Properties"]
    assert group["Parameters"] == {"rds.force_ssl": "1"}
    engine = resources["DatabaseCluster"]["Properties"]["EngineVersion"]
    assert group["Family"] == f"aurora-postgresql{engine.split('.')[0]}"
    assert resources["DatabaseCluster"]["Properties"]["DBClusterParameterGroupName"] == {
        "Ref": "DatabaseClusterParameterGroup"
    }


# ------------------------------------------------------------------ samconfig.toml's environments


def samconfig_parameters() -> dict[str, dict[str, str]]:
    """Each samconfig.toml environment's deploy parameter_overrides, as ``sam deploy --config-env`` passes them."""
    import shlex
    import tomllib

    config = tomllib.loads((ROOT / "samconfig.toml").read_text(encoding="utf-8"))
    found = {}
    for environment, commands in config.items():
        if isinstance(commands, dict) and "deploy" in commands:
            overrides = commands["deploy"]["parameters"]["parameter_overrides"]
            found[environment] = dict(item.split("=", 1) for item in shlex.split(overrides))
    return found


@pytest.mark.parametrize("environment", ["default", "prod"])
def test_each_samconfig_environment_deploys_an_accepted_shape(template: dict[str, Any], environment: str) -> None:
    given = samconfig_parameters()[environment]
    assert set(given) <= set(template["Parameters"]), "samconfig.toml names a parameter the template lacks"
    assert refusals(template, **given) == []
    resources = resolve(given)
    assert all(statement.get("Resource") or "Principal" in statement for _, statement in policy_statements(resources))


def test_the_dev_environment_is_the_low_cost_shape() -> None:
    development = samconfig_parameters()["default"]
    for name, value in PARAMETER_SETS["low-cost-development"].items():
        assert development[name] == value, name


# ------------------------------------------------------------------ every combination the Rules allow


def allowed_combinations(template: dict[str, Any]) -> list[dict[str, str]]:
    """Every combination of the shape-deciding parameters that the template's Rules accept."""
    import itertools

    choices: dict[str, list[dict[str, str]]] = {
        "database": [
            {},
            dict(YOUR_DATABASE),
            {**YOUR_DATABASE, "ExistingDbMigratorSecretArn": "arn:aws:secretsmanager:x"},
        ],
        "vpc": [{}, dict(YOUR_VPC)],
        "stage": [{}, {"Stage": "prod", "AlarmEmail": "ops@example.com"}],
        "live": [{"LivePublishing": "queue"}, {"LivePublishing": "direct"}],
        "logging": [{"ApiGatewayLoggingRole": value} for value in ("create", "existing", "none")],
        "reserved": [{"ReservedConcurrency": "false"}, {"ReservedConcurrency": "true"}],
        "bedrock": [{}, {"SummarizerModelArn": BEDROCK_MODEL}],
        "zones": [{"InterfaceEndpointZones": "2"}, {"InterfaceEndpointZones": "1"}],
        "egress": [{}, {"S3PrefixListId": "pl-6da54004", "DynamoDbPrefixListId": "pl-6fa54006"}],
    }
    combinations = []
    for parts in itertools.product(*choices.values()):
        given: dict[str, str] = {}
        for part in parts:
            given.update(part)
        if refusals(template, **given) == []:
            combinations.append(given)
    return combinations


def test_every_combination_the_rules_allow_resolves_to_a_complete_template(template: dict[str, Any]) -> None:
    """No statement without a resource, no AWS::NoValue left, no reference to a resource the shape leaves out."""
    combinations = allowed_combinations(template)
    assert len(combinations) > 100
    expanded = expand({})
    declared = set(expanded["Parameters"])
    for given in combinations:
        resources = resolve(given, expanded)
        assert "AWS::NoValue" not in json.dumps(resources), given
        for owner, statement in policy_statements(resources):
            assert statement.get("Action") and (statement.get("Resource") or "Principal" in statement), (given, owner)
        for name, resource in resources.items():
            depends_on = resource.get("DependsOn", [])
            named = references(resource.get("Properties", {})) | set(
                [depends_on] if isinstance(depends_on, str) else depends_on
            )
            missing = named - set(resources) - declared
            assert not missing, f"{name} names {sorted(missing)}, which {given} does not create"
