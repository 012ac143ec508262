"""Lookalike names and bidi controls (issue 29.12): one spelling per new resource, and
nothing invisible reaches a terminal from a record."""

from __future__ import annotations

import unicodedata
from pathlib import Path

import pytest
from conftest import run_cli
from hypothesis import given
from hypothesis import strategies as st

from gitlease._util.text import INVISIBLE_CATEGORIES, visible
from gitlease.errors import UsageError
from gitlease.model.spelling import check_new_resource

NFC = "caf\u00e9"
NFD = "cafe\u0301"
ZWSP = "caf\u200b\u00e9"
RLO = "x\u202ey"


@pytest.mark.parametrize("spelling", [NFD, ZWSP, RLO, "a\u2028b", "soft\u00adhyphen"])
def test_a_second_spelling_or_an_invisible_character_is_refused_at_acquire(
    repo: Path, spelling: str
) -> None:
    """NFC, NFD and zero-width-space spellings of café were three claims printed alike."""
    assert run_cli("acquire", NFC, "--no-bind", cwd=repo).code == 0
    got = run_cli("acquire", spelling, "--no-bind", "--json", cwd=repo)
    assert got.code == 2, got
    assert run_cli("bundle", "acquire", "other/1", spelling, "--no-bind", cwd=repo).code == 2
    assert [c["resource"] for c in run_cli("list", "--json", cwd=repo).json["claims"]] == [NFC]
    for ch in spelling:
        if unicodedata.category(ch) in INVISIBLE_CATEGORIES:
            assert ch not in got.out + got.err, "the refusal printed it raw"


def test_a_bidi_control_in_a_record_written_by_others_is_escaped_on_output(
    repo: Path, store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A record whose resource holds U+202E (written before this rule, or by hand) reached
    the terminal raw in `list` and `show`."""
    from gitlease.api.lease import acquire
    from gitlease.claims import request

    monkeypatch.setattr(request, "check_new_resource", lambda r: r)  # an older writer
    acquire(store, RLO, bind=False, note="n\u200bote")
    for args in (["list"], ["show", RLO], ["list", "--json"], ["show", RLO, "--json"]):
        got = run_cli(*args, cwd=repo)
        assert got.code == 0, got
        assert "\u202e" not in got.out and "\u200b" not in got.out, (args, got.out)
        assert "\\u202e" in got.out, (args, got.out)
    assert run_cli("release", RLO, cwd=repo).code == 0, "an existing name stays releasable"


@given(st.text(max_size=40))
def test_visible_text_holds_no_invisible_character(text: str) -> None:
    shown = visible(text)
    assert not any(unicodedata.category(ch) in INVISIBLE_CATEGORIES for ch in shown)
    assert not any(ord(ch) < 0x20 or 0x7F <= ord(ch) <= 0x9F for ch in shown)


@given(st.text(min_size=1, max_size=40))
def test_a_new_resource_is_accepted_only_in_its_one_visible_spelling(text: str) -> None:
    invisible = any(unicodedata.category(ch) in INVISIBLE_CATEGORIES for ch in text)
    nfc = unicodedata.is_normalized("NFC", text)
    try:
        check_new_resource(text)
        accepted = True
    except UsageError:
        accepted = False
    assert accepted == (nfc and not invisible)
    if accepted:  # every other spelling of the same name is refused
        for form in ("NFD",):
            other = unicodedata.normalize(form, text)
            if other != text:
                with pytest.raises(UsageError):
                    check_new_resource(other)
