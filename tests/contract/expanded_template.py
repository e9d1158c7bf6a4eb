"""The template as CloudFormation deploys it: expanded by the SAM translator, then resolved for one parameter set.

``expand`` runs SAM's own ``transform()`` (code folders replaced by S3 URIs, as ``sam package`` would), with the
parameter values CloudFormation would hand it. ``resolve`` then does what CloudFormation does with the result for
that parameter set: it evaluates the ``Conditions``, drops the resources whose condition is false, picks each
``Fn::If`` branch and removes ``AWS::NoValue``. What is left is what would be created, so a test can read IAM
statements, dependencies and properties exactly as AWS would receive them.
"""

from __future__ import annotations

import copy
import json
import os
from functools import cache
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
REGION = "eu-west-1"
REQUIRED = {"JwtIssuer": "https://cognito-idp.eu-west-1.amazonaws.com/eu-west-1_EXAMPLE", "JwtAudience": "client"}
YOUR_VPC = {"ExistingVpcId": "vpc-0a1b2c3d", "ExistingSubnetIds": "subnet-0a1b,subnet-0c2d"}
YOUR_DATABASE = {
    **YOUR_VPC,
    "CreateDatabase": "false",
    "ExistingDbHost": "mine.proxy-abc.eu-west-1.rds.amazonaws.com",
    "ExistingDbProxyResourceId": "prx-0123456789abcdef0",
}
BEDROCK_MODEL = "arn:aws:bedrock:*::foundation-model/anthropic.claude-3-5-haiku-20241022-v1:0"

# Every shape the docs offer; each must pass the template's Rules (a test checks), expand and lint clean.
PARAMETER_SETS: dict[str, dict[str, str]] = {
    "created-database": {},
    "created-database-prod": {
        "Stage": "prod",
        "AlarmEmail": "ops@example.com",
        "ReservedConcurrency": "true",
        "SummarizerModelArn": BEDROCK_MODEL,
        "DbMaxCapacity": "16",
        "LogRetentionDays": "90",
    },
    "created-database-your-vpc-direct-live": {
        **YOUR_VPC,
        "LivePublishing": "direct",
        "ApiGatewayLoggingRole": "existing",
    },
    "your-database-iam-migrator": dict(YOUR_DATABASE),
    "your-database-migrator-secret": {
        **YOUR_DATABASE,
        "ExistingDbMigratorSecretArn": "arn:aws:secretsmanager:eu-west-1:123456789012:secret:threadloom-admin-AbCdEf",
        "LivePublishing": "direct",
    },
    "no-websocket-access-logs": {"ApiGatewayLoggingRole": "none"},
    "low-cost-development": {"InterfaceEndpointZones": "1", "LogRetentionDays": "7"},
    "narrow-https-egress": {"S3PrefixListId": "pl-6da54004", "DynamoDbPrefixListId": "pl-6fa54006"},
    "idle-reflection": {"IdleReflectionMinutes": "30", "IdleReflectionEveryMinutes": "10"},
}


class _ManagedPolicies:
    """The managed policies SAM's policy templates name, without asking IAM."""

    def load(self) -> dict[str, str]:
        names = (
            "service-role/AWSLambdaBasicExecutionRole",
            "AWSXrayWriteOnlyAccess",
            "service-role/AWSLambdaVPCAccessExecutionRole",
        )
        return {name.rsplit("/", 1)[-1]: f"arn:aws:iam::aws:policy/{name}" for name in names}


def parameters(given: dict[str, str]) -> dict[str, Any]:
    """Every parameter's value for a deploy with ``given``: the template's defaults, the required ones filled in."""
    values: dict[str, Any] = {}
    for name, spec in declared_parameters().items():
        raw = str(given.get(name, REQUIRED.get(name, spec.get("Default", ""))))
        values[name] = raw.split(",") if spec["Type"] == "CommaDelimitedList" else raw
    return values


@cache
def declared_parameters() -> dict[str, Any]:
    from samtranslator.yaml_helper import yaml_parse

    return yaml_parse(template_text())["Parameters"]  # type: ignore[no-any-return]


@cache
def template_text() -> str:
    return (ROOT / "template.yaml").read_text(encoding="utf-8")


def expand(given: dict[str, str], *, text: str | None = None, layer: str = "layer") -> dict[str, Any]:
    """The SAM translator's output for ``given`` (``layer`` names the layer's uploaded content)."""
    return copy.deepcopy(_expand(json.dumps(given, sort_keys=True), text or template_text(), layer))


@cache
def _expand(given_json: str, text: str, layer: str) -> dict[str, Any]:
    from samtranslator.translator.transform import transform
    from samtranslator.yaml_helper import yaml_parse

    os.environ.setdefault("AWS_DEFAULT_REGION", REGION)
    document = yaml_parse(text)
    for name, resource in document["Resources"].items():
        properties = resource.get("Properties", {})
        if "CodeUri" in properties:
            properties["CodeUri"] = f"s3://artifacts/{name}.zip"
        if "ContentUri" in properties:
            properties["ContentUri"] = f"s3://artifacts/{layer}.zip"
    return transform(document, parameters(json.loads(given_json)), _ManagedPolicies())  # type: ignore[no-any-return]


NO_VALUE = {"Ref": "AWS::NoValue"}


class Resolver:
    """Conditions and ``Fn::If`` of an expanded template, evaluated for one parameter set."""

    def __init__(self, expanded: dict[str, Any], values: dict[str, Any]) -> None:
        self.values = values
        self.conditions: dict[str, Any] = expanded.get("Conditions", {})
        self.known: dict[str, bool] = {}

    def condition(self, name: str) -> bool:
        if name not in self.known:
            self.known[name] = bool(self.evaluate(self.conditions[name]))
        return self.known[name]

    def evaluate(self, expression: Any) -> Any:
        if not isinstance(expression, dict) or len(expression) != 1:
            return expression
        ((function, argument),) = expression.items()
        if function == "Ref" and argument in self.values:
            value = self.values[argument]
            return ",".join(value) if isinstance(value, list) else value
        if function == "Condition":
            return self.condition(argument)
        if function == "Fn::Equals":
            left, right = (self.evaluate(item) for item in argument)
            return str(left) == str(right)
        if function == "Fn::Not":
            return not self.evaluate(argument[0])
        if function == "Fn::And":
            return all(self.evaluate(item) for item in argument)
        if function == "Fn::Or":
            return any(self.evaluate(item) for item in argument)
        return expression

    def resolve(self, value: Any) -> Any:
        """``value`` with every ``Fn::If`` decided and every ``AWS::NoValue`` removed."""
        if isinstance(value, list):
            items = [self.resolve(item) for item in value]
            return [item for item in items if item != NO_VALUE]
        if not isinstance(value, dict):
            return value
        if set(value) == {"Fn::If"}:
            name, when_true, when_false = value["Fn::If"]
            return self.resolve(when_true if self.condition(name) else when_false)
        resolved = {key: self.resolve(item) for key, item in value.items()}
        return {key: item for key, item in resolved.items() if item != NO_VALUE}


def resolve(given: dict[str, str], expanded: dict[str, Any] | None = None) -> dict[str, dict[str, Any]]:
    """The resources CloudFormation would create for ``given``, with their properties as it would read them."""
    expanded = expanded if expanded is not None else expand(given)
    resolver = Resolver(expanded, parameters(given))
    return {
        name: resolver.resolve(resource)
        for name, resource in expanded["Resources"].items()
        if "Condition" not in resource or resolver.condition(resource["Condition"])
    }


def references(value: Any) -> set[str]:
    """The logical ids ``value`` names through Ref, Fn::GetAtt and Fn::Sub (so depends on)."""
    import re

    found: set[str] = set()
    if isinstance(value, list):
        for item in value:
            found |= references(item)
    elif isinstance(value, dict):
        for key, item in value.items():
            if key == "Ref" and isinstance(item, str):
                found.add(item)
            elif key == "Ref":
                found |= references(item)
            elif key == "Fn::GetAtt":
                found.add(item[0] if isinstance(item, list) else str(item).split(".", 1)[0])
            elif key == "Fn::Sub":
                text = item if isinstance(item, str) else item[0]
                local = set(item[1]) if isinstance(item, list) else set()
                found |= {name.split(".", 1)[0] for name in re.findall(r"\$\{([^!}][^}]*)\}", text)} - local
                found |= references(item[1] if isinstance(item, list) else [])
            else:
                found |= references(item)
    return {name for name in found if not name.startswith("AWS::")}


def dependencies(resources: dict[str, dict[str, Any]], name: str) -> set[str]:
    """Every resource ``name`` waits for on create, so every one CloudFormation deletes only after it."""
    seen: set[str] = set()
    pending = [name]
    while pending:
        resource = resources[pending.pop()]
        depends_on = resource.get("DependsOn", [])
        direct = references(resource.get("Properties", {})) | set(
            [depends_on] if isinstance(depends_on, str) else depends_on
        )
        for found in direct & set(resources) - seen:
            seen.add(found)
            pending.append(found)
    return seen


def policy_statements(resources: dict[str, dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """Every IAM statement the stack creates (role inline policies, managed policies, key and bucket policies)."""
    found: list[tuple[str, dict[str, Any]]] = []
    for name, resource in resources.items():
        properties = resource.get("Properties", {})
        policies = properties.get("Policies", [])
        documents = [policy["PolicyDocument"] for policy in policies if "PolicyDocument" in policy]
        documents += [properties[key] for key in ("PolicyDocument", "KeyPolicy") if key in properties]
        if resource["Type"] == "AWS::IAM::Role":
            documents.append(properties["AssumeRolePolicyDocument"])
        for document in documents:
            statements = document["Statement"]
            found += [(name, statement) for statement in (statements if isinstance(statements, list) else [statements])]
    return found
