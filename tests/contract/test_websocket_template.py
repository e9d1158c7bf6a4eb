"""The live-status WebSocket API in template.yaml: routes, $connect authorizer, stage, table, publishing, privileges."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from threadloom.live.aws.relay import DELIVERY_BUDGET_SECONDS

from tests.contract.test_app_contract import ROOT, CfnLoader

ROUTES = {"$connect", "$disconnect", "subscribe", "unsubscribe", "$default"}
PUBLISHERS = ("ApiFunction", "CompactionFunction")
"""The functions in the VPC whose writes publish live events."""
CONNECTIONS_ARN_SUFFIX = ":${WebSocketApi}/${WebSocketStage}/POST/@connections/*"


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    return yaml.load((ROOT / "template.yaml").read_text(encoding="utf-8"), Loader=CfnLoader)  # type: ignore[no-any-return]


def of_type(template: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {name: resource for name, resource in template["Resources"].items() if resource["Type"] == kind}


def statements(function: dict[str, Any]) -> list[dict[str, Any]]:
    policies = function["Properties"].get("Policies", [])
    return [statement for policy in policies if "Statement" in policy for statement in policy["Statement"]]


def policies_when(function: dict[str, Any], *, queue: bool) -> list[Any]:
    """The function's policies as deployed with LivePublishing=queue (or direct): ``Fn::If`` on it resolved."""
    resolved = []
    for declared in function["Properties"].get("Policies", []):
        policy = declared
        if isinstance(declared, dict) and "Fn::If" in declared:
            condition, when_true, when_false = declared["Fn::If"]
            if condition == "LiveThroughQueue":
                policy = when_true if queue else when_false
        if policy != {"Ref": "AWS::NoValue"}:
            resolved.append(policy)
    return resolved


def manage_connections(policies: list[Any]) -> list[dict[str, Any]]:
    return [
        statement
        for policy in policies
        if isinstance(policy, dict) and "Statement" in policy
        for statement in policy["Statement"]
        if statement["Action"] == "execute-api:ManageConnections"
    ]


def test_the_api_routes_on_the_action_field(template: dict[str, Any]) -> None:
    (api,) = of_type(template, "AWS::ApiGatewayV2::Api").values()
    assert api["Properties"]["ProtocolType"] == "WEBSOCKET"
    assert api["Properties"]["RouteSelectionExpression"] == "$request.body.action"


def test_every_route_goes_to_the_websocket_function(template: dict[str, Any]) -> None:
    routes = of_type(template, "AWS::ApiGatewayV2::Route")
    assert {route["Properties"]["RouteKey"] for route in routes.values()} == ROUTES
    integrations = of_type(template, "AWS::ApiGatewayV2::Integration")
    for route in routes.values():
        integration_name = route["Properties"]["Target"]["Fn::Sub"].removeprefix("integrations/${").rstrip("}")
        integration = integrations[integration_name]["Properties"]
        assert integration["IntegrationType"] == "AWS_PROXY"
        assert "${WebSocketFunction.Arn}" in integration["IntegrationUri"]["Fn::Sub"]


def test_only_connect_is_authorized_by_the_jwt_authorizer(template: dict[str, Any]) -> None:
    routes = {
        route["Properties"]["RouteKey"]: route["Properties"]
        for route in of_type(template, "AWS::ApiGatewayV2::Route").values()
    }
    assert routes["$connect"]["AuthorizationType"] == "CUSTOM"
    authorizer = template["Resources"][routes["$connect"]["AuthorizerId"]["Ref"]]["Properties"]
    assert authorizer["AuthorizerType"] == "REQUEST"
    assert "${WebSocketAuthorizerFunction.Arn}" in authorizer["AuthorizerUri"]["Fn::Sub"]
    # header OR query parameter: listing identity sources would make API Gateway demand all of them
    assert "IdentitySource" not in authorizer
    assert all(routes[key]["AuthorizationType"] == "NONE" for key in ROUTES - {"$connect"})


def test_replies_are_sent_back_on_the_message_routes(template: dict[str, Any]) -> None:
    routes = of_type(template, "AWS::ApiGatewayV2::Route")
    answered = {
        routes[response["Properties"]["RouteId"]["Ref"]]["Properties"]["RouteKey"]
        for response in of_type(template, "AWS::ApiGatewayV2::RouteResponse").values()
    }
    assert answered == {"subscribe", "unsubscribe", "$default"}


def test_the_authorizer_verifies_the_http_apis_issuer_and_audience(template: dict[str, Any]) -> None:
    function = template["Resources"]["WebSocketAuthorizerFunction"]
    variables = function["Properties"]["Environment"]["Variables"]
    assert variables["THREADLOOM_JWT_ISSUER"] == {"Ref": "JwtIssuer"}
    assert variables["THREADLOOM_JWT_AUDIENCE"] == {"Fn::Join": [",", {"Ref": "JwtAudience"}]}
    http_jwt = template["Resources"]["HttpApi"]["Properties"]["Auth"]["Authorizers"]["JwtAuthorizer"][
        "JwtConfiguration"
    ]
    assert http_jwt == {"issuer": {"Ref": "JwtIssuer"}, "audience": {"Ref": "JwtAudience"}}
    assert function["IgnoreGlobals"] == ["VpcConfig"]  # it fetches the issuer's JWKS from the internet
    assert "Policies" not in function["Properties"]  # nothing but its logs
    requirements = (ROOT / "functions/websocket_authorizer/requirements.txt").read_text(encoding="utf-8")
    assert "pyjwt[crypto]" in requirements


def test_api_gateway_may_invoke_both_functions_of_this_api_only(template: dict[str, Any]) -> None:
    permissions = {
        p["Properties"]["FunctionName"]["Ref"]: p["Properties"]
        for p in of_type(template, "AWS::Lambda::Permission").values()
    }
    for function in ("WebSocketFunction", "WebSocketAuthorizerFunction"):
        assert permissions[function]["Principal"] == "apigateway.amazonaws.com"
        assert "${WebSocketApi}/" in permissions[function]["SourceArn"]["Fn::Sub"]


def test_the_connections_table_has_keys_and_ttl(template: dict[str, Any]) -> None:
    table = template["Resources"]["ConnectionsTable"]["Properties"]
    assert [(k["AttributeName"], k["KeyType"]) for k in table["KeySchema"]] == [("pk", "HASH"), ("sk", "RANGE")]
    assert table["TimeToLiveSpecification"] == {"AttributeName": "expires_at", "Enabled": True}
    assert table["BillingMode"] == "PAY_PER_REQUEST" and table["SSESpecification"]["SSEEnabled"] is True


def test_live_publishing_is_a_parameter_defaulting_to_the_queue(template: dict[str, Any]) -> None:
    parameter = template["Parameters"]["LivePublishing"]
    assert parameter["AllowedValues"] == ["queue", "direct"] and parameter["Default"] == "queue"
    assert template["Conditions"]["LiveThroughQueue"] == {"Fn::Equals": [{"Ref": "LivePublishing"}, "queue"]}


@pytest.mark.parametrize("name", PUBLISHERS)
def test_publishers_in_the_vpc_hand_off_to_the_queue_or_post_to_this_stage(template: dict[str, Any], name: str) -> None:
    function = template["Resources"][name]
    variables = function["Properties"]["Environment"]["Variables"]
    assert variables["THREADLOOM_CONNECTIONS_TABLE"] == {"Ref": "ConnectionsTable"}
    assert variables["THREADLOOM_WEBSOCKET_ENDPOINT"]["Fn::Sub"].startswith("https://${WebSocketApi}.execute-api.")
    assert variables["THREADLOOM_LIVE_PUBLISHING"] == {"Ref": "LivePublishing"}
    assert variables["THREADLOOM_LIVE_QUEUE_URL"] == {"Ref": "LiveEventsQueue"}
    # queue: may send to the live-events queue, may not manage connections (it could not reach them anyway)
    queued = policies_when(function, queue=True)
    assert {"SQSSendMessagePolicy": {"QueueName": {"Fn::GetAtt": ["LiveEventsQueue", "QueueName"]}}} in queued
    assert manage_connections(queued) == []
    # direct: may post to this stage's connections only, may not send to the live-events queue
    direct = policies_when(function, queue=False)
    (manage,) = manage_connections(direct)
    assert manage["Resource"]["Fn::Sub"].endswith(CONNECTIONS_ARN_SUFFIX)
    assert all("LiveEventsQueue" not in str(policy) for policy in direct)
    # both: the subscribers Query (and, direct, forgetting gone connections)
    (connections,) = [s for s in statements(function) if s["Resource"] == {"Fn::GetAtt": ["ConnectionsTable", "Arn"]}]
    assert {"dynamodb:Query", "dynamodb:BatchWriteItem"} <= set(connections["Action"])


def test_nothing_else_may_manage_connections(template: dict[str, Any]) -> None:
    for name, function in of_type(template, "AWS::Serverless::Function").items():
        if name not in (*PUBLISHERS, "LivePublisherFunction"):
            assert all("execute-api:ManageConnections" not in str(s) for s in statements(function)), name


def test_the_live_events_queue_is_an_encrypted_fifo_queue_with_a_watched_dead_letter_queue(
    template: dict[str, Any],
) -> None:
    resources = template["Resources"]
    queue = resources["LiveEventsQueue"]["Properties"]
    dlq = resources["LiveEventsDeadLetterQueue"]["Properties"]
    assert queue["FifoQueue"] is True and queue["ContentBasedDeduplication"] is False  # one fresh id per event
    assert (queue["DeduplicationScope"], queue["FifoThroughputLimit"]) == ("messageGroup", "perMessageGroupId")
    assert queue["SqsManagedSseEnabled"] is True and dlq["SqsManagedSseEnabled"] is True
    assert dlq["FifoQueue"] is True
    redrive = queue["RedrivePolicy"]
    assert redrive["deadLetterTargetArn"] == {"Fn::GetAtt": ["LiveEventsDeadLetterQueue", "Arn"]}
    publisher = resources["LivePublisherFunction"]["Properties"]
    assert queue["VisibilityTimeout"] >= 6 * publisher["Timeout"]
    # a failing message reaches the dead-letter queue before it expires
    assert queue["MessageRetentionPeriod"] > redrive["maxReceiveCount"] * queue["VisibilityTimeout"]
    alarm = resources["LiveEventsDeadLetterQueueAlarm"]["Properties"]
    assert alarm["Dimensions"][0]["Value"] == {"Fn::GetAtt": ["LiveEventsDeadLetterQueue", "QueueName"]}
    assert (alarm["MetricName"], alarm["Threshold"]) == ("ApproximateNumberOfMessagesVisible", 0)


def test_the_rejected_messages_alarm_watches_what_the_live_publisher_emits(template: dict[str, Any]) -> None:
    alarm = template["Resources"]["LiveMessagesRejectedAlarm"]["Properties"]
    function = template["Resources"]["LivePublisherFunction"]["Properties"]
    service = function["Environment"]["Variables"]["POWERTOOLS_SERVICE_NAME"]
    assert (
        alarm["Namespace"]
        == template["Globals"]["Function"]["Environment"]["Variables"]["POWERTOOLS_METRICS_NAMESPACE"]
    )
    assert alarm["Dimensions"] == [{"Name": "service", "Value": service}]
    handler = (ROOT / "functions/live_publisher/threadloom_live_publisher.py").read_text(encoding="utf-8")
    assert f'name="{alarm["MetricName"]}"' in handler


def test_the_live_publisher_runs_outside_the_vpc_with_least_privilege(template: dict[str, Any]) -> None:
    function = template["Resources"]["LivePublisherFunction"]
    properties = function["Properties"]
    assert function["IgnoreGlobals"] == ["VpcConfig"]  # the Management API is only reachable over the internet
    variables = properties["Environment"]["Variables"]
    assert variables["THREADLOOM_CONNECTIONS_TABLE"] == {"Ref": "ConnectionsTable"}
    assert variables["THREADLOOM_WEBSOCKET_ENDPOINT"]["Fn::Sub"].startswith("https://${WebSocketApi}.execute-api.")
    assert (ROOT / properties["CodeUri"] / f"{properties['Handler'].split('.')[0]}.py").is_file()
    # only: post to this stage's connections, and forget a gone connection (what ConnectionsTable.close calls)
    (policy,) = properties["Policies"]
    manage, forget = policy["Statement"]
    assert manage["Action"] == "execute-api:ManageConnections"
    assert manage["Resource"]["Fn::Sub"].endswith(CONNECTIONS_ARN_SUFFIX)
    assert sorted(forget["Action"]) == sorted(dynamodb_actions_of("close"))  # ConnectionsTable.close, nothing more
    assert forget["Resource"] == {"Fn::GetAtt": ["ConnectionsTable", "Arn"]}
    # fed by the live-events queue, reporting partial batch failures, a batch finishing inside the timeout
    (event,) = properties["Events"].values()
    assert event["Type"] == "SQS"
    assert event["Properties"]["Queue"] == {"Fn::GetAtt": ["LiveEventsQueue", "Arn"]}
    assert event["Properties"]["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    per_message = DELIVERY_BUDGET_SECONDS + 1  # no post starts after the budget; the last end within 1 s of timeouts
    assert event["Properties"]["BatchSize"] * per_message + 10 <= properties["Timeout"]


def test_the_stage_deploys_itself_and_the_url_is_an_output(template: dict[str, Any]) -> None:
    stage = template["Resources"]["WebSocketStage"]["Properties"]
    condition, logging, no_logging = stage["AccessLogSettings"]["Fn::If"]
    assert stage["AutoDeploy"] is True and logging["DestinationArn"] and no_logging == {"Ref": "AWS::NoValue"}
    assert condition == "WebSocketAccessLogging"  # off only with ApiGatewayLoggingRole=none
    assert stage["DefaultRouteSettings"]["ThrottlingRateLimit"] > 0
    url = template["Outputs"]["WebSocketUrl"]["Value"]["Fn::Sub"]
    assert url.startswith("wss://${WebSocketApi}.execute-api.") and url.endswith("/${WebSocketStage}")


@pytest.fixture(scope="module")
def transformed(monkeypatch_module: pytest.MonkeyPatch) -> dict[str, Any]:
    """The template as SAM expands it (local code paths replaced by S3 URIs, as `sam package` would)."""
    from samtranslator.translator.transform import transform
    from samtranslator.yaml_helper import yaml_parse

    monkeypatch_module.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    document = yaml_parse((ROOT / "template.yaml").read_text(encoding="utf-8"))
    for name, resource in document["Resources"].items():
        properties = resource.get("Properties", {})
        for key in ("CodeUri", "ContentUri"):
            if key in properties:
                properties[key] = f"s3://artifacts/{name}.zip"

    class ManagedPolicies:
        def load(self) -> dict[str, str]:
            names = ("service-role/AWSLambdaBasicExecutionRole", "AWSXrayWriteOnlyAccess")
            names += ("service-role/AWSLambdaVPCAccessExecutionRole",)
            return {name.rsplit("/", 1)[-1]: f"arn:aws:iam::aws:policy/{name}" for name in names}

    parameters = {"JwtIssuer": "https://issuer.example", "JwtAudience": "client"}
    return transform(document, parameters, ManagedPolicies())["Resources"]  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def monkeypatch_module() -> Iterator[pytest.MonkeyPatch]:
    with pytest.MonkeyPatch.context() as patch:
        yield patch


def test_sam_keeps_the_authorizer_and_the_publisher_out_of_the_vpc_and_the_routes_in(
    transformed: dict[str, Any],
) -> None:
    for name in ("WebSocketAuthorizerFunction", "LivePublisherFunction"):
        assert "VpcConfig" not in transformed[name]["Properties"], name
    for name in ("WebSocketFunction", "ApiFunction", "CompactionFunction"):
        assert "VpcConfig" in transformed[name]["Properties"], name


def test_sam_gives_the_authorizer_only_logging_and_tracing(transformed: dict[str, Any]) -> None:
    role = transformed["WebSocketAuthorizerFunctionRole"]["Properties"]
    assert "Policies" not in role
    assert sorted(arn.rsplit("/", 1)[1] for arn in role["ManagedPolicyArns"]) == [
        "AWSLambdaBasicExecutionRole",
        "AWSXrayWriteOnlyAccess",
    ]


def dynamodb_actions_of(*calls: str) -> set[str]:
    """The IAM actions the connections table's ``calls`` make on moto, a transaction's items counted one by one."""
    import boto3
    from moto import mock_aws
    from threadloom.live.aws.connections import ConnectionsTable

    from tests.support.connections import CONNECTIONS_TABLE, create_connections_table

    actions: set[str] = set()

    def record(model: Any, params: dict[str, Any], **_: Any) -> None:
        if model.name == "TransactWriteItems":
            kinds = {
                "Put": "PutItem",
                "Update": "UpdateItem",
                "Delete": "DeleteItem",
                "ConditionCheck": "ConditionCheckItem",
            }
            actions.update(f"dynamodb:{kinds[kind]}" for item in params["TransactItems"] for kind in item)
        else:
            actions.add(f"dynamodb:{model.name}")

    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        create_connections_table(client)
        client.meta.events.register("provide-client-params.dynamodb", record)
        table = ConnectionsTable(CONNECTIONS_TABLE, client=client)
        steps = {
            "open": lambda: (
                table.open("c1", tenant="t", limit=1),
                table.open("c2", tenant="t", limit=1),
            ),  # c2 refused
            "subscribe": lambda: (
                table.subscribe("c1", tenant="t", session_id="s", limit=2),
                table.subscribe("c1", tenant="t", session_id="s2", limit=2),
                table.subscribe("c1", tenant="t", session_id="s3", limit=2),  # refused: full
            ),
            "message": lambda: table.open_connection("c1"),
            "unsubscribe": lambda: table.unsubscribe("c1", tenant="t", session_id="s"),
            "publish": lambda: table.subscribers("t", "s"),
            "close": lambda: table.close("c1"),  # with its subscription to s2
        }
        for name, step in steps.items():
            recording = name in calls
            if not recording:
                client.meta.events.unregister("provide-client-params.dynamodb", record)
            step()
            if not recording:
                client.meta.events.register("provide-client-params.dynamodb", record)
    return actions


def allowed_on_connections(function: dict[str, Any]) -> set[str]:
    allowed: set[str] = set()
    for statement in statements(function):
        if statement.get("Resource") == {"Fn::GetAtt": ["ConnectionsTable", "Arn"]}:
            action = statement["Action"]
            allowed.update([action] if isinstance(action, str) else action)
    return allowed


def test_each_function_may_do_what_its_connections_table_calls_do(template: dict[str, Any]) -> None:
    """Moto does not check IAM: a call the policy lacks would only fail once deployed."""
    functions = of_type(template, "AWS::Serverless::Function")
    needs = {
        "WebSocketFunction": dynamodb_actions_of("open", "subscribe", "message", "unsubscribe", "close"),
        "LivePublisherFunction": dynamodb_actions_of("close"),
        **{name: dynamodb_actions_of("publish", "close") for name in PUBLISHERS},  # direct: posts, forgets gone ones
    }
    assert {"dynamodb:TransactWriteItems"} & set().union(*needs.values()) == set()  # counted per item above
    for name, needed in needs.items():
        assert needed <= allowed_on_connections(functions[name]), name
