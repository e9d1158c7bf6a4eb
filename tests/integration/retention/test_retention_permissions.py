"""The retention function's every AWS call is one its role in template.yaml grants.

moto does not enforce IAM, so a call the policy lacks passes every other test and fails only once
deployed: the function read a session's idempotency index with ``GetItem``, which the role did not
grant, and every scheduled sweep stopped at the first expired session. Here a botocore hook refuses,
as AWS would, any call whose action the function's policy statements do not list.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import boto3
import pytest
import yaml
from botocore.exceptions import ClientError
from moto import mock_aws
from threadloom import SqliteStore
from threadloom.api.profile import parse_profile
from threadloom.api.runtime import Runtime, Settings, set_runtime
from threadloom.lifecycle.derived import aws_client, idempotency_index_key

from tests.contract.test_app_contract import CfnLoader
from tests.support.api import FakeLambdaContext, text

ROOT = Path(__file__).resolve().parents[3]
EVENT = ROOT / "events" / "retention_schedule.json"
# An API operation and the IAM action that authorizes it, where the two names differ
ACTION_OF = {("s3", "ListObjectsV2"): "s3:ListBucket", ("s3", "DeleteObjects"): "s3:DeleteObject"}


def granted_actions(function: str) -> set[str]:
    template = yaml.load((ROOT / "template.yaml").read_text(encoding="utf-8"), Loader=CfnLoader)
    actions: set[str] = set()
    for policy in template["Resources"][function]["Properties"]["Policies"]:
        for statement in policy.get("Statement", []) if isinstance(policy, dict) else []:
            if statement.get("Effect") == "Allow":
                listed = statement["Action"]
                actions.update([listed] if isinstance(listed, str) else listed)
    return actions


@pytest.fixture(autouse=True)
def _forget_runtime() -> Any:
    yield
    set_runtime(None)
    aws_client.cache_clear()


def test_a_sweep_makes_only_calls_the_retention_role_grants(tmp_path: Path) -> None:
    from threadloom_retention import lambda_handler

    granted = granted_actions("RetentionFunction")
    refused: list[str] = []

    def as_iam(model: Any, **_: Any) -> None:
        service = model.service_model.endpoint_prefix
        action = ACTION_OF.get((service, model.name), f"{service}:{model.name}")
        if action not in granted:
            refused.append(action)
            denial = {"Code": "AccessDeniedException", "Message": f"not granted: {action}"}
            raise ClientError({"Error": denial}, model.name)

    with mock_aws():
        dynamodb = boto3.client("dynamodb", region_name="us-east-1")
        for table, key in (("prompts", "pk"), ("idempotency", "id")):
            dynamodb.create_table(
                TableName=table,
                BillingMode="PAY_PER_REQUEST",
                AttributeDefinitions=[{"AttributeName": key, "AttributeType": "S"}],
                KeySchema=[{"AttributeName": key, "KeyType": "HASH"}],
            )
        boto3.client("s3", region_name="us-east-1").create_bucket(Bucket="exports")
        settings = Settings(
            prompt_table="prompts", export_bucket="exports", idempotency_table="idempotency", compaction_mode="inline"
        )
        profile = {
            "blocks": [{"label": "memory", "kind": "writable"}],
            "prompt_cache": {"backend": "dynamodb"},
            "retention": {"inactive_days": 30},
        }
        runtime = Runtime(settings, profile=parse_profile(profile), store=SqliteStore(str(tmp_path / "r.db")))
        set_runtime(runtime)
        manager = runtime.manager("tenant-a")
        old = manager.create("Old").id
        manager.append(old, text("o1", "user", "kumquat harvest notes"))
        manager.get_session(old).freeze_system_prompt()
        # A keyed write's idempotency record, listed in the session's index item as the API lists it
        index = idempotency_index_key("tenant-a", old)
        dynamodb.put_item(TableName="idempotency", Item={"id": {"S": "record-1"}, "data": {"S": "kumquat"}})
        dynamodb.put_item(TableName="idempotency", Item={"id": {"S": index}, "records": {"SS": ["record-1"]}})
        boto3.client("s3", region_name="us-east-1").put_object(
            Bucket="exports", Key=f"exports/tenant-a/{old}/e.jsonl", Body=b"kumquat"
        )
        with runtime.store.database.write() as tx:
            expired = "UPDATE threadloom_sessions SET updated_at = '2020-01-01T00:00:00.000Z' WHERE id = :a"
            tx.execute(expired, {"a": old})
        aws_client.cache_clear()
        for service in ("dynamodb", "s3"):
            aws_client(service).meta.events.register("before-call.*.*", as_iam)
        result = lambda_handler(json.loads(EVENT.read_text(encoding="utf-8")), FakeLambdaContext())  # type: ignore[arg-type]
        assert refused == []
        assert result["removed"] == 1 and result["counts"]["idempotency_records"] == 1
        assert result["counts"]["prompt_cache"] == 1 and result["counts"]["export_objects"] == 1
        assert dynamodb.scan(TableName="idempotency")["Count"] == 0
        assert manager.get(old) is None


def test_the_iam_check_refuses_what_the_role_lacks() -> None:
    """Control: the hook's mapping refuses an action no statement grants (so an empty refusal list means something)."""
    granted = granted_actions("RetentionFunction")
    assert "dynamodb:PutItem" not in granted and "s3:GetObject" not in granted
    assert {"dynamodb:GetItem", "dynamodb:DeleteItem", "s3:ListBucket", "s3:DeleteObject"} <= granted
