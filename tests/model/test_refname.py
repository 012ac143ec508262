"""The ref encoding: injective, reversible, valid, and free of case-fold and file/dir clashes."""

from __future__ import annotations

import pygit2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gitlease.errors import UsageError
from gitlease.model.refname import MAX_RESOURCE_BYTES, decode, encode, validate_resource

# Resources: any text without control characters, at most 512 UTF-8 bytes; biased
# towards the characters that matter to the encoding.
_interesting = st.sampled_from([*"/.-_%+Aa@{}~^:?*[\\ ", "lock", "lease", "é", "Σ", "ß"])
_chars = st.characters(blacklist_categories=("Cc", "Cs"))
resources = (
    st.lists(st.one_of(_interesting, _chars, st.text(_chars, max_size=5)), min_size=1, max_size=60)
    .map("".join)
    .filter(lambda s: s and len(s.encode()) <= MAX_RESOURCE_BYTES)
)


@pytest.mark.parametrize(
    ("resource", "ref"),
    [
        ("github/acme/api/42", "refs/worklease/github/acme/api/42.lease"),
        ("taskmaster/master/3.2", "refs/worklease/taskmaster/master/3.2.lease"),
        ("beads/bd-a1b2", "refs/worklease/beads/bd-a1b2.lease"),
        ("a", "refs/worklease/a.lease"),
        ("a/b", "refs/worklease/a/b.lease"),
        ("jira/ABC-12", "refs/worklease/jira/%41%42%43-12.lease"),
        ("x.lock", "refs/worklease/x%2elock.lease"),
        ("a.lease/b", "refs/worklease/a%2elease/b.lease"),
        ("/a//b/", "refs/worklease/%2fa%2f/b%2f.lease"),
        (".hidden", "refs/worklease/%2ehidden.lease"),
        ("a..b", "refs/worklease/a%2e%2eb.lease"),
    ],
)
def test_known_encodings(resource: str, ref: str) -> None:
    assert encode(resource) == ref
    assert decode(ref) == resource


def test_plain_names_stay_readable() -> None:
    assert encode("github/acme/api/42").endswith("github/acme/api/42.lease")


@given(resources)
@settings(max_examples=500)
def test_round_trip_and_validity(resource: str) -> None:
    ref = encode(resource)
    assert decode(ref) == resource
    assert pygit2.reference_is_valid_name(ref), ref
    assert ref == ref.lower(), "a ref must not depend on case"
    for component in ref.split("/"):
        assert 0 < len(component.encode()) < 128


@given(resources, resources)
@settings(max_examples=500)
def test_no_collisions(a: str, b: str) -> None:
    ra, rb = encode(a), encode(b)
    if a != b:
        assert ra.casefold() != rb.casefold()
        # neither ref may sit where the other needs a directory
        assert not rb.startswith(ra + "/")
        assert not ra.startswith(rb + "/")


@given(st.lists(resources, min_size=2, max_size=6, unique=True))
def test_any_set_of_resources_can_coexist_in_one_repository(tmp_path_factory, names) -> None:
    repo = pygit2.init_repository(str(tmp_path_factory.mktemp("r")), bare=True)
    blob = repo.create_blob(b"x")
    for name in names:
        repo.references.create(encode(name), blob)
    assert sorted(decode(r) for r in repo.references if r.startswith("refs/worklease/")) == sorted(
        names
    )


def test_long_resources_are_split_into_short_components() -> None:
    resource = "é" * 256  # 512 bytes, 1536 encoded characters
    ref = encode(resource)
    assert max(len(c) for c in ref.split("/")) < 128
    assert decode(ref) == resource


@pytest.mark.parametrize(
    "bad", ["", "a\nb", "tab\there", "nul\0", "x" * (MAX_RESOURCE_BYTES + 1), "\x7f", "\ud800"]
)
def test_bad_resources_are_refused(bad: str) -> None:
    with pytest.raises(UsageError):
        validate_resource(bad)
    with pytest.raises(UsageError):
        encode(bad)


@pytest.mark.parametrize(
    "ref",
    [
        "refs/heads/main",
        "refs/worklease/a",
        "refs/worklease/A.lease",
        "refs/worklease/%41.lease%",
        "refs/worklease/a%2fb.lease",
        "refs/worklease/a+.lease",
        "refs/worklease/.lease",
    ],
)
def test_decode_refuses_what_encode_cannot_produce(ref: str) -> None:
    with pytest.raises(UsageError):
        decode(ref)
