"""``--json``: only the option counts (not after ``--``, not as an option's value), before or
after a group's command name; and the documents are laid out as ``json`` lays them out
(docs/reference/json.md).
"""

from __future__ import annotations

import json
import re

from hypothesis import given, settings
from hypothesis import strategies as st

R = "edge/1"


def test_json_after_the_double_dash_is_the_commands_argument(cli, worktrees) -> None:
    a, b = worktrees
    assert cli("acquire", R, cwd=a).code == 0
    got = cli("exec", R, "--", "echo", "--json", cwd=b)
    assert got.code == 3, got
    assert got.out == "" and got.err.startswith("gitlease: HELD:"), got


def test_json_as_the_value_of_an_option_is_that_value(cli, worktrees) -> None:
    a, b = worktrees
    assert cli("acquire", R, cwd=a).code == 0
    got = cli("acquire", R, "--note", "--json", cwd=b)
    assert got.code == 3 and got.out == "" and got.err.startswith("gitlease: HELD:"), got
    took = cli("acquire", "edge/2", "--note", "--json", cwd=b)
    assert took.code == 0 and took.out.startswith("acquired"), took
    assert cli("show", "edge/2", "--json").json["note"] == "--json"
    parse_error = cli("acquire", R, "--no-such-option", "--json", cwd=b)
    assert parse_error.code == 2 and parse_error.json["error"]["code"] == "USAGE"


def test_json_goes_before_or_after_a_group_s_command_name(cli) -> None:
    """docs/reference/json.md: `--json` may stand before or after the command name, for the
    commands of a group too."""
    bid = cli("bundle", "acquire", "g/1", "g/2", "--json").json["bundle_id"]
    for args in (["bundle", "--json", "show", bid], ["bundle", "show", bid, "--json"]):
        got = cli(*args)
        assert got.code == 0 and got.json["bundle_id"] == bid, (args, got)
    for args in (["hooks", "--json", "status"], ["hooks", "status", "--json"]):
        got = cli(*args)
        assert "hooks" in got.json, (args, got)


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text() | st.integers() | st.booleans() | st.none(), inner, max_size=4)
    ),
    max_leaves=20,
)


@given(_JSON)
@settings(max_examples=300, deadline=None)
def test_json_documents_are_laid_out_as_json_lays_them_out(doc) -> None:
    import re
    import unicodedata

    from gitlease.cli.jsonout import json_text

    def escape(m: re.Match[str]) -> str:
        ch = m.group()
        code = ord(ch)
        invisible = unicodedata.category(ch) in ("Cf", "Zl", "Zp")
        if code <= 0x9F or 0xD800 <= code <= 0xDFFF or invisible:
            return json.dumps(ch)[1:-1]  # json's own \\u escape (a surrogate pair if astral)
        return ch

    # DEL, C1 controls, lone surrogates and invisible characters escaped; all else as json
    # writes it with ensure_ascii=False
    want = json.dumps(doc, indent=2, ensure_ascii=False)
    assert json_text(doc) == re.sub(r"[\x7f-\U0010ffff]", escape, want)
