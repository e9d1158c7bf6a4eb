"""S3SkillProvider: the reference's R2 skill provider (§10) on S3, against moto (and Stubber for failures)."""

from __future__ import annotations

import time
from collections import Counter
from typing import TYPE_CHECKING, Any

import boto3
import pytest
from botocore.config import Config
from botocore.stub import Stubber
from moto import mock_aws
from threadloom.errors import SkillStoreError, StorageUnavailableError, ValidationError
from threadloom.providers.protocols import SkillProvider, is_skill_provider, is_writable_provider
from threadloom.providers.s3_skills import (
    S3SkillProvider,
    decode_description,
    default_s3_client,
    encode_description,
)

if TYPE_CHECKING:
    from collections.abc import Iterator

    from mypy_boto3_s3.client import S3Client

BUCKET = "threadloom-skills"


@pytest.fixture
def s3() -> Iterator[S3Client]:
    with mock_aws():
        client = boto3.client("s3", region_name="us-east-1")
        client.create_bucket(Bucket=BUCKET)
        yield client


def count_calls(client: S3Client) -> Counter[str]:
    """Count API calls by operation name (``ListObjectsV2``, ``HeadObject``...) made through ``client``."""
    calls: Counter[str] = Counter()

    def record(model: Any, **_: Any) -> None:
        calls[model.name] += 1

    client.meta.events.register("before-call.s3.*", record)
    return calls


def put(client: S3Client, key: str, body: str = "body", description: str | None = None) -> None:
    """Write an object the way another tool would: metadata exactly as given."""
    metadata = {"description": description} if description is not None else {}
    client.put_object(Bucket=BUCKET, Key=key, Body=body.encode(), Metadata=metadata)


def stubbed_client() -> tuple[S3Client, Stubber]:
    client = boto3.client("s3", region_name="us-east-1")
    return client, Stubber(client)


# --- listing -------------------------------------------------------------------------------------------------------


def test_get_pages_through_every_listing_page_in_key_order(s3: S3Client) -> None:
    # Given seven skills and a provider listing two keys a page
    for index in range(7):
        put(s3, f"skill-{index}", description=f"Skill number {index}")
    provider = S3SkillProvider(BUCKET, client=s3, page_size=2)
    calls = count_calls(s3)

    # When the collection is listed
    listing = provider.get()

    # Then every skill appears once, in bucket order, and the listing took four pages
    assert listing == "\n".join(f"- skill-{index}: Skill number {index}" for index in range(7))
    assert calls["ListObjectsV2"] == 4


@pytest.mark.slow
def test_get_lists_more_than_one_thousand_objects(s3: S3Client) -> None:
    # Given 1,005 skills, more than one S3 listing page at the default page size
    for index in range(1005):
        put(s3, f"k{index:04d}")
    provider = S3SkillProvider(BUCKET, client=s3)
    calls = count_calls(s3)

    # When the collection is listed
    listing = provider.get()

    # Then all of them are listed, over two pages
    assert listing is not None
    lines = listing.split("\n")
    assert len(lines) == 1005
    assert lines[0] == "- k0000"
    assert lines[-1] == "- k1004"
    assert calls["ListObjectsV2"] == 2


def test_get_strips_the_prefix_exactly_as_given_and_ignores_other_keys(s3: S3Client) -> None:
    # Given skills under "agents/support/" and objects outside it
    put(s3, "agents/support/tax", description="Tax workflows")
    put(s3, "agents/support/bank-reconciliation", description="Bank reconciliation")
    put(s3, "agents/sales/pitch", description="Not ours")
    put(s3, "agents/support-old/legacy")
    provider = S3SkillProvider(BUCKET, prefix="agents/support/", client=s3)

    # When the collection is listed
    listing = provider.get()

    # Then keys are relative to the prefix and only the prefix's objects appear
    assert listing == "- bank-reconciliation: Bank reconciliation\n- tax: Tax workflows"


def test_get_without_prefix_or_descriptions_lists_bare_keys(s3: S3Client) -> None:
    # Given two skills with no description metadata (the reference's example)
    put(s3, "tax")
    put(s3, "hidden")

    # When the collection is listed
    listing = S3SkillProvider(BUCKET, client=s3).get()

    # Then each line is "- <key>"
    assert listing == "- hidden\n- tax"


def test_get_returns_none_for_an_empty_collection(s3: S3Client) -> None:
    # Given a bucket with nothing under the prefix
    put(s3, "elsewhere/x")

    # When the collection is listed
    listing = S3SkillProvider(BUCKET, prefix="skills/", client=s3).get()

    # Then there is no listing at all
    assert listing is None


def test_get_skips_objects_whose_keys_could_never_be_loaded(s3: S3Client) -> None:
    # Given a console folder placeholder, an empty segment and a dot-dot segment next to a real skill
    put(s3, "skills/guides/", body="")
    put(s3, "skills/a//b")
    put(s3, "skills/x/../y")
    put(s3, "skills/guides/tax")

    # When the collection is listed
    listing = S3SkillProvider(BUCKET, prefix="skills/", client=s3).get()

    # Then only the loadable skill is offered
    assert listing == "- guides/tax"


def test_allow_list_filters_the_listing_and_skips_head_requests(s3: S3Client) -> None:
    # Given three skills of which two are allowed
    for key in ("alpha", "beta", "gamma"):
        put(s3, f"s/{key}", description=key.title())
    provider = S3SkillProvider(BUCKET, prefix="s/", keys=["gamma", "alpha"], client=s3)
    calls = count_calls(s3)

    # When the collection is listed
    listing = provider.get()

    # Then only allowed keys appear, in listing order, and the skipped one cost no HEAD
    assert listing == "- alpha: Alpha\n- gamma: Gamma"
    assert calls["HeadObject"] == 2


def test_empty_allow_list_allows_everything(s3: S3Client) -> None:
    # Given a provider whose allow-list is empty
    put(s3, "one")
    provider = S3SkillProvider(BUCKET, keys=[], client=s3)

    # When listing and loading
    listing, loaded = provider.get(), provider.load("one")

    # Then nothing is filtered
    assert listing == "- one"
    assert loaded == "body"


# --- descriptions ----------------------------------------------------------------------------------------------------


def test_non_ascii_description_round_trips_through_ascii_metadata(s3: S3Client) -> None:
    # Given a skill written with a non-ASCII description
    provider = S3SkillProvider(BUCKET, prefix="p/", client=s3)
    provider.set("pirate", "Arr!", "Café ☕ — «parler pirate»")

    # When the raw metadata and the listing are read
    raw = s3.head_object(Bucket=BUCKET, Key="p/pirate")["Metadata"]["description"]
    listing = provider.get()

    # Then S3 holds an RFC 2047 encoded word and the listing shows the original text
    assert raw.isascii()
    assert raw.startswith("=?UTF-8?B?")
    assert listing == "- pirate: Café ☕ — «parler pirate»"


def test_ascii_description_is_stored_verbatim(s3: S3Client) -> None:
    # Given a skill written with a plain ASCII description
    S3SkillProvider(BUCKET, client=s3).set("tax", "...", "Tax workflows")

    # When the raw metadata is read
    raw = s3.head_object(Bucket=BUCKET, Key="tax")["Metadata"]

    # Then other tools see the description unchanged
    assert raw == {"description": "Tax workflows"}


def test_descriptions_written_by_other_tools_are_decoded(s3: S3Client) -> None:
    # Given objects whose descriptions another tool wrote: RFC 2047 Q-encoded, plain, and a malformed encoded word
    put(s3, "a", description="=?utf-8?q?caf=C3=A9_cr=C3=A8me?=")
    put(s3, "b", description="100% plain")
    put(s3, "c", description="=?bogus-charset?q?x?=")

    # When the collection is listed
    listing = S3SkillProvider(BUCKET, client=s3).get()

    # Then encoded words are decoded and anything undecodable is shown as stored
    assert listing == "- a: café crème\n- b: 100% plain\n- c: =?bogus-charset?q?x?="


@pytest.mark.parametrize(
    "description",
    ["plain", "Café", "line one\nline two", "  padded  ", "looks =?like?= a word", "tab\there", "日本語の説明"],
)
def test_description_encoding_round_trips(description: str) -> None:
    # Given any description
    # When it is encoded for S3 metadata and decoded again
    encoded = encode_description(description)

    # Then the stored form is printable ASCII and decodes to the original
    assert encoded.isascii()
    assert encoded.isprintable()
    assert decode_description(encoded) == description


def test_set_without_description_clears_the_old_one(s3: S3Client) -> None:
    # Given a skill with a description
    provider = S3SkillProvider(BUCKET, client=s3)
    provider.set("tax", "v1", "Tax workflows")
    assert provider.get() == "- tax: Tax workflows"

    # When it is rewritten without a description (empty string counts as none)
    provider.set("tax", "v2", "")

    # Then the object has no description metadata and the listing shows the bare key
    assert s3.head_object(Bucket=BUCKET, Key="tax")["Metadata"] == {}
    assert provider.get() == "- tax"
    assert provider.load("tax") == "v2"


def test_too_long_description_is_rejected_before_writing(s3: S3Client) -> None:
    # Given a description over S3's 2 KB user metadata limit
    provider = S3SkillProvider(BUCKET, client=s3)
    calls = count_calls(s3)

    # When it is stored
    with pytest.raises(ValidationError, match="too long"):
        provider.set("tax", "...", "x" * 2100)

    # Then nothing was sent
    assert calls["PutObject"] == 0


def test_descriptions_are_cached_per_etag_and_last_modified(s3: S3Client) -> None:
    # Given a listed collection of three skills
    for key in ("a", "b", "c"):
        put(s3, key, description=f"Old {key}")
    provider = S3SkillProvider(BUCKET, client=s3)
    assert provider.get() == "- a: Old a\n- b: Old b\n- c: Old c"
    calls = count_calls(s3)

    # When it is listed again unchanged
    again = provider.get()

    # Then no HEAD request was needed
    assert again == "- a: Old a\n- b: Old b\n- c: Old c"
    assert calls["HeadObject"] == 0

    # When one description is changed through the provider and one by a metadata-only copy (same ETag); S3 dates
    # have one-second resolution, so the copy waits for the next second to get a new LastModified
    provider.set("a", "body", "New a")
    time.sleep(1.05)
    s3.copy_object(
        Bucket=BUCKET,
        Key="b",
        CopySource={"Bucket": BUCKET, "Key": "b"},
        Metadata={"description": "New b"},
        MetadataDirective="REPLACE",
    )
    calls.clear()
    listing = provider.get()

    # Then both changes show, and only the changed objects were HEADed again
    assert listing == "- a: New a\n- b: New b\n- c: Old c"
    assert calls["HeadObject"] == 2


def test_single_worker_provider_lists_sequentially(s3: S3Client) -> None:
    # Given a provider that may not run HEADs concurrently
    for key in ("a", "b", "c"):
        put(s3, key, description=key.upper())
    provider = S3SkillProvider(BUCKET, client=s3, max_workers=1)

    # When the collection is listed
    listing = provider.get()

    # Then the result is the same as with the thread pool
    assert listing == "- a: A\n- b: B\n- c: C"


# --- load and set ----------------------------------------------------------------------------------------------------


def test_set_then_load_round_trips_utf8_text(s3: S3Client) -> None:
    # Given a skill stored under a prefix
    provider = S3SkillProvider(BUCKET, prefix="skills/", client=s3)
    provider.set("guides/tax", "# Impôts\nÉtape 1 ✓\r\n")

    # When it is loaded
    loaded = provider.load("guides/tax")

    # Then the text is returned exactly, and the object sits at prefix + key
    assert loaded == "# Impôts\nÉtape 1 ✓\r\n"
    assert s3.get_object(Bucket=BUCKET, Key="skills/guides/tax")["Body"].read().decode() == loaded


def test_load_decodes_invalid_utf8_with_replacement_characters(s3: S3Client) -> None:
    # Given an object holding bytes that are not UTF-8
    s3.put_object(Bucket=BUCKET, Key="latin1", Body="café".encode("latin-1"))

    # When it is loaded
    loaded = S3SkillProvider(BUCKET, client=s3).load("latin1")

    # Then undecodable bytes become U+FFFD, as TextDecoder does in the reference
    assert loaded == "caf\ufffd"


def test_load_of_a_missing_skill_returns_none(s3: S3Client) -> None:
    # Given an empty collection
    provider = S3SkillProvider(BUCKET, prefix="skills/", client=s3)

    # When a missing skill is loaded
    loaded = provider.load("nope")

    # Then it is None, not an error
    assert loaded is None


def test_load_outside_the_allow_list_returns_none_without_fetching(s3: S3Client) -> None:
    # Given a stored skill that is not in the allow-list
    put(s3, "secret")
    provider = S3SkillProvider(BUCKET, keys=["public"], client=s3)
    calls = count_calls(s3)

    # When it is loaded
    loaded = provider.load("secret")

    # Then nothing is fetched and the result is None
    assert loaded is None
    assert sum(calls.values()) == 0


def test_set_ignores_the_allow_list(s3: S3Client) -> None:
    # Given a provider that only allows "public"
    provider = S3SkillProvider(BUCKET, keys=["public"], client=s3)

    # When another key is written
    provider.set("private", "text")

    # Then the write happened, as in the reference
    assert s3.get_object(Bucket=BUCKET, Key="private")["Body"].read() == b"text"


INVALID_KEYS = [
    "",
    "/absolute",
    "..",
    "../escape",
    "a/../b",
    "a/./b",
    "a//b",
    "trailing/",
    "back\\slash",
    "nul\x00byte",
    "new\nline",
    "del\x7f",
    "x" * 513,
]


@pytest.mark.parametrize("key", INVALID_KEYS)
def test_invalid_keys_are_rejected_before_any_request(s3: S3Client, key: str) -> None:
    # Given a provider
    provider = S3SkillProvider(BUCKET, client=s3)
    calls = count_calls(s3)

    # When an invalid key is loaded or stored
    with pytest.raises(ValidationError, match="Invalid skill key"):
        provider.load(key)
    with pytest.raises(ValidationError, match="Invalid skill key"):
        provider.set(key, "content")

    # Then S3 was never called
    assert sum(calls.values()) == 0


def test_key_length_bound_counts_the_prefix(s3: S3Client) -> None:
    # Given a prefix of 500 bytes
    provider = S3SkillProvider(BUCKET, prefix="p" * 500, client=s3)

    # When a 12-byte key is used, then a 13-byte one (512 and 513 bytes in all)
    provider.set("k" * 12, "fits")

    # Then the first fits and the second is rejected
    assert provider.load("k" * 12) == "fits"
    with pytest.raises(ValidationError, match="512 UTF-8 bytes"):
        provider.load("k" * 13)


# --- failures --------------------------------------------------------------------------------------------------------


def test_missing_bucket_raises_skill_store_error() -> None:
    # Given a provider for a bucket that does not exist
    with mock_aws():
        provider = S3SkillProvider("no-such-bucket", client=boto3.client("s3", region_name="us-east-1"))

        # When listing, loading or storing
        # Then each raises SkillStoreError naming the bucket
        with pytest.raises(SkillStoreError, match='"no-such-bucket" does not exist'):
            provider.get()
        with pytest.raises(SkillStoreError, match='"no-such-bucket" does not exist'):
            provider.load("tax")
        with pytest.raises(SkillStoreError, match='"no-such-bucket" does not exist'):
            provider.set("tax", "content")


@pytest.mark.parametrize(
    ("operation", "call"),
    [
        ("list_objects_v2", lambda provider: provider.get()),
        ("get_object", lambda provider: provider.load("tax")),
        ("put_object", lambda provider: provider.set("tax", "content")),
    ],
)
def test_access_denied_raises_skill_store_error(operation: str, call: Any) -> None:
    # Given S3 denies the request
    client, stubber = stubbed_client()
    stubber.add_client_error(operation, service_error_code="AccessDenied", http_status_code=403)
    provider = S3SkillProvider(BUCKET, client=client)

    # When the provider calls it
    with stubber, pytest.raises(SkillStoreError, match="denied") as raised:
        call(provider)

    # Then a SkillStoreError wraps the botocore error
    assert raised.value.__cause__ is not None
    stubber.assert_no_pending_responses()


def test_forbidden_head_request_raises_skill_store_error() -> None:
    # Given a listing that succeeds and a HEAD that is refused (HEAD errors carry only the status code)
    client, stubber = stubbed_client()
    stubber.add_response(
        "list_objects_v2",
        {"Contents": [{"Key": "tax", "ETag": '"e"'}], "IsTruncated": False, "KeyCount": 1},
    )
    stubber.add_client_error("head_object", service_error_code="403", http_status_code=403)

    # When the collection is listed
    with stubber, pytest.raises(SkillStoreError, match="denied"):
        S3SkillProvider(BUCKET, client=client).get()

    # Then both stubbed calls were made
    stubber.assert_no_pending_responses()


@pytest.mark.parametrize(("code", "status"), [("SlowDown", 503), ("InternalError", 500), ("ServiceUnavailable", 503)])
def test_throttling_and_server_errors_raise_storage_unavailable(code: str, status: int) -> None:
    # Given S3 answers with a retryable error (after botocore's own retries)
    client, stubber = stubbed_client()
    stubber.add_client_error("get_object", service_error_code=code, http_status_code=status)

    # When a skill is loaded
    with stubber, pytest.raises(StorageUnavailableError, match=code):
        S3SkillProvider(BUCKET, client=client).load("tax")

    # Then the error was the stubbed one
    stubber.assert_no_pending_responses()


def test_unreachable_endpoint_raises_storage_unavailable() -> None:
    # Given a client pointed at a port nobody listens on, without retries
    client = boto3.client(
        "s3",
        region_name="us-east-1",
        endpoint_url="http://127.0.0.1:9",
        config=Config(retries={"max_attempts": 1, "mode": "standard"}, connect_timeout=1),
    )

    # When the collection is listed
    with pytest.raises(StorageUnavailableError, match="could not be reached") as raised:
        S3SkillProvider(BUCKET, client=client).get()

    # Then no botocore exception escaped unwrapped
    assert raised.value.__cause__ is not None


def test_other_client_errors_raise_skill_store_error() -> None:
    # Given S3 rejects the request for a reason retrying will not fix
    client, stubber = stubbed_client()
    stubber.add_client_error("put_object", service_error_code="InvalidBucketName", http_status_code=400)

    # When a skill is stored
    with stubber, pytest.raises(SkillStoreError, match="InvalidBucketName"):
        S3SkillProvider(BUCKET, client=client).set("tax", "content")

    # Then the stubbed call was consumed
    stubber.assert_no_pending_responses()


# --- construction ----------------------------------------------------------------------------------------------------


def test_default_client_is_created_lazily_on_first_use() -> None:
    # Given no cached default client
    default_s3_client.cache_clear()
    try:
        with mock_aws():
            boto3.client("s3", region_name="us-east-1").create_bucket(Bucket=BUCKET)

            # When a provider is built without a client
            provider = S3SkillProvider(BUCKET)

            # Then no client exists until the first call, which then creates and caches one
            assert default_s3_client.cache_info().currsize == 0
            provider.set("tax", "content")
            assert provider.load("tax") == "content"
            assert default_s3_client.cache_info().currsize == 1
    finally:
        default_s3_client.cache_clear()


def test_provider_is_a_writable_skill_provider() -> None:
    # Given a provider (no AWS call is needed to build one)
    provider = S3SkillProvider(BUCKET, client=boto3.client("s3", region_name="us-east-1"))

    # When it is classified the way ContextBlocks does
    # Then it is a skill block that accepts writes
    assert isinstance(provider, SkillProvider)
    assert is_skill_provider(provider)
    assert is_writable_provider(provider)


@pytest.mark.parametrize(
    "kwargs", [{"bucket": ""}, {"bucket": BUCKET, "max_workers": 0}, {"bucket": BUCKET, "page_size": 1001}]
)
def test_bad_construction_arguments_raise_validation_error(kwargs: dict[str, Any]) -> None:
    # Given bad constructor arguments
    # When the provider is built
    # Then it refuses with ValidationError
    with pytest.raises(ValidationError):
        S3SkillProvider(**kwargs)
