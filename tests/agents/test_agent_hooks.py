"""The agent harnesses' hooks: an edit the claim no longer covers is denied before it is made.

Real repositories and worktrees, real claims through the CLI, the harnesses' published
payloads (tests/support/payloads/, with their sources) piped into the command that
``gitlease agents install`` wrote into the harness's settings, run through ``sh -c`` from
the worktree, as the harnesses run a command hook.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import SUPPORT, git, wait_state

from gitlease.agents import payloads
from gitlease.agents.specs import SPECS

PAYLOADS = SUPPORT / "payloads"
R = "agents/task-1"
EDITS = {
    "claude-code": [
        "claude-code-pretooluse-edit.json",
        "claude-code-pretooluse-write.json",
        "claude-code-pretooluse-multiedit.json",
        "claude-code-pretooluse-notebookedit.json",
    ],
    "codex": ["codex-pretooluse-apply_patch.json"],
    "gemini": ["gemini-beforetool-write_file.json", "gemini-beforetool-replace.json"],
}
EDIT_CASES = [(h, f) for h, files in EDITS.items() for f in files]
SESSION = {
    "claude-code": "claude-code-sessionstart.json",
    "codex": "codex-sessionstart.json",
    "gemini": "gemini-sessionstart.json",
}


def payload(name: str, worktree: Path) -> str:
    return (PAYLOADS / name).read_text().replace("{WORKTREE}", str(worktree))


def prepare(worktree: Path) -> None:
    (worktree / "src").mkdir(exist_ok=True)
    (worktree / "src" / "app.py").write_text("print('hello')\n")


def installed_command(cli, worktree: Path, harness: str) -> str:
    """The command that ``agents install`` put into the harness's settings for the edit."""
    result = cli("agents", "install", harness, cwd=worktree)
    assert result.code == 0, result
    spec = SPECS[harness][0]
    doc = json.loads((worktree / spec.path).read_text())
    event = spec.hooks[0].event
    commands = [h["command"] for g in doc["hooks"][event] for h in g["hooks"]]
    assert len(commands) == 1 and "-I -m gitlease.agents.hook" in commands[0]
    return commands[0]


def run_hook(command: str, stdin: str | bytes, cwd: Path) -> subprocess.CompletedProcess[str]:
    """As the harness runs a command hook: through the shell, in the project, payload on stdin."""
    data = stdin.encode() if isinstance(stdin, str) else stdin
    proc = subprocess.run(["sh", "-c", command], input=data, cwd=cwd, capture_output=True)
    return subprocess.CompletedProcess(
        proc.args, proc.returncode, proc.stdout.decode(), proc.stderr.decode()
    )


def lapse(cli, worktree: Path, resource: str = R) -> str:
    """A claim of ``worktree`` that expired (waited for through ``show``); its claim id."""
    result = cli("acquire", resource, "--ttl", "1s", "--json", cwd=worktree)
    assert result.code == 0, result
    claim_id = result.json["claim_id"]
    wait_state(cli, resource, "expired")
    return claim_id


def denial(harness: str, out: str) -> str:
    """The reason of a deny in ``harness``'s own format (asserting that format)."""
    doc = json.loads(out)
    if harness == "gemini":
        assert doc["decision"] == "deny"
        assert "hookSpecificOutput" not in doc
        return str(doc["reason"])
    spec = doc["hookSpecificOutput"]
    assert spec["hookEventName"] == "PreToolUse"
    assert spec["permissionDecision"] == "deny"
    assert "allow" not in out
    return str(spec["permissionDecisionReason"])


# ------------------------------------------------------------------ before an edit


@pytest.mark.parametrize(("harness", "name"), EDIT_CASES)
def test_an_edit_under_a_lapsed_claim_is_denied_in_the_harness_format(
    cli, repo: Path, harness: str, name: str
) -> None:
    prepare(repo)
    command = installed_command(cli, repo, harness)
    claim_id = lapse(cli, repo)
    result = run_hook(command, payload(name, repo), repo)
    assert result.returncode == 0, result
    reason = denial(harness, result.stdout)
    assert R in reason and claim_id in reason and "expired" in reason
    assert "Next step: Re-acquire the resource" in reason
    assert str(repo) in reason


@pytest.mark.parametrize(("harness", "name"), EDIT_CASES)
def test_an_edit_under_a_live_claim_says_nothing(cli, repo: Path, harness: str, name: str) -> None:
    prepare(repo)
    command = installed_command(cli, repo, harness)
    assert cli("acquire", R, "--ttl", "10m", cwd=repo).code == 0
    result = run_hook(command, payload(name, repo), repo)
    assert (result.returncode, result.stdout) == (0, ""), result


def receipt_of(worktree_git_dir: Path) -> str:
    (binding,) = (worktree_git_dir / "worklease" / "bindings").glob("*.json")
    return str(json.loads(binding.read_text())["receipt"])


@pytest.mark.parametrize("harness", list(EDITS))
def test_a_claim_released_elsewhere_or_replaced_denies_the_edit(
    cli, repo: Path, worktrees: tuple[Path, Path], harness: str
) -> None:
    a, b = worktrees
    prepare(a)
    command = installed_command(cli, a, harness)
    assert cli("acquire", R, cwd=a).code == 0
    receipt = receipt_of(repo / ".git" / "worktrees" / "wt-a")
    assert cli("release", R, "--receipt", receipt, cwd=b).code == 0  # not a's own release
    assert "released" in denial(harness, run_hook(command, payload(EDITS[harness][0], a), a).stdout)
    assert cli("acquire", R, cwd=b).code == 0  # someone else holds it now
    reason = denial(harness, run_hook(command, payload(EDITS[harness][0], a), a).stdout)
    assert R in reason and "Next step" in reason


@pytest.mark.parametrize("harness", list(EDITS))
def test_an_edit_inside_another_claims_path_scope_is_denied(
    cli, repo: Path, worktrees: tuple[Path, Path], harness: str
) -> None:
    """The file (src/app.py in every published payload) lies in a scope that another
    worktree's live claim reserves: denied, naming that claim; the holder's own edit passes."""
    a, b = worktrees
    prepare(a)
    prepare(b)
    command_a = installed_command(cli, a, harness)
    held = cli("acquire", "owner/1", "--paths", "src/**", "--json", cwd=b)
    assert held.code == 0, held
    reason = denial(harness, run_hook(command_a, payload(EDITS[harness][0], a), a).stdout)
    assert held.json["claim_id"] in reason and "src/**" in reason
    # the file is the holder's: a's own claims are fine, so there is nothing to re-acquire
    assert "leave them to it" in reason and "Re-acquire" not in reason, reason
    command_b = installed_command(cli, b, harness)
    result = run_hook(command_b, payload(EDITS[harness][0], b), b)
    assert (result.returncode, result.stdout) == (0, ""), result
    assert cli("release", "owner/1", cwd=b).code == 0
    result = run_hook(command_a, payload(EDITS[harness][0], a), a)
    assert (result.returncode, result.stdout) == (0, ""), result


@pytest.mark.parametrize("harness", list(EDITS))
def test_no_binding_and_no_require_claim_says_nothing(cli, repo: Path, harness: str) -> None:
    prepare(repo)
    command = installed_command(cli, repo, harness)
    result = run_hook(command, payload(EDITS[harness][0], repo), repo)
    assert (result.returncode, result.stdout) == (0, ""), result


@pytest.mark.parametrize("harness", list(EDITS))
def test_require_claim_without_one_is_denied(cli, repo: Path, harness: str) -> None:
    prepare(repo)
    command = installed_command(cli, repo, harness)
    git("config", "gitlease.requireClaim", "true", cwd=repo)
    result = run_hook(command, payload(EDITS[harness][0], repo), repo)
    reason = denial(harness, result.stdout)
    assert "gitlease.requireClaim" in reason and "`gitlease acquire RESOURCE`" in reason
    assert cli("acquire", R, cwd=repo).code == 0
    assert run_hook(command, payload(EDITS[harness][0], repo), repo).stdout == ""


def codex_patch(worktree: Path, *files: str) -> str:
    doc = json.loads(payload("codex-pretooluse-apply_patch.json", worktree))
    body = "".join(f"*** Update File: {f}\n@@\n-a\n+b\n" for f in files)
    doc["tool_input"]["command"] = f"*** Begin Patch\n{body}*** End Patch\n"
    return json.dumps(doc)


def test_a_codex_patch_touching_two_files_names_both(cli, repo: Path) -> None:
    prepare(repo)
    command = installed_command(cli, repo, "codex")
    lapse(cli, repo)
    result = run_hook(command, payload("codex-pretooluse-apply_patch.json", repo), repo)
    reason = denial("codex", result.stdout)
    assert "src/app.py, docs/notes.md" in reason  # an update and a new file


def test_a_codex_patch_across_worktrees_is_judged_per_worktree(
    cli, repo: Path, worktrees: tuple[Path, Path]
) -> None:
    a, b = worktrees
    for wt in (a, b):
        prepare(wt)
    command = installed_command(cli, a, "codex")
    assert cli("acquire", "agents/a", "--ttl", "10m", cwd=a).code == 0
    lapse(cli, b, "agents/b")
    live_only = codex_patch(a, "src/app.py")
    assert run_hook(command, live_only, a).stdout == ""
    both = codex_patch(a, "src/app.py", "../wt-b/src/app.py")
    reason = denial("codex", run_hook(command, both, a).stdout)
    assert f"the worktree {b}" in reason and "agents/b" in reason
    assert f"the worktree {a}" not in reason and "agents/a" not in reason


def test_codex_move_and_delete_headers_count(cli, repo: Path) -> None:
    text = (
        "*** Begin Patch\n*** Update File: a.py\n*** Move to: b.py\n@@\n-x\n+y\n"
        "*** Delete File: c.py\n*** Add File: d.py\n+z\n*** End Patch\n"
    )
    assert payloads.patch_paths(text) == ["a.py", "b.py", "c.py", "d.py"]


def test_a_codex_patch_header_is_read_as_codex_reads_it() -> None:
    """Codex trims each header line and ends lines at ``\n`` only: an indented header, or a
    path holding a character Python's ``splitlines`` breaks at, was applied by Codex and
    missed here (an edit inside another claim's scope allowed)."""
    text = (
        "*** Begin Patch\n*** Add File: notes.txt\n+hi\n\t*** Update File: src/auth/x.py\n"
        "@@\n-a\n+b\n  *** Add File: q\x1c/../src/auth/new.py\n+z\n*** End Patch\n"
    )
    assert payloads.patch_paths(text) == [
        "notes.txt",
        "src/auth/x.py",
        "q\x1c/../src/auth/new.py",
    ]


@pytest.mark.parametrize("bad", list(BAD_TEXT := {"not JSON": b"{this", "garbage": b"garbage"}))
def test_an_unreadable_payload_fails_closed_under_require_claim(cli, repo: Path, bad: str) -> None:
    """Under ``gitlease.requireClaim`` a worktree holding no claim is checked too: an
    unreadable payload was let through there (it was denied only where a binding exists)."""
    prepare(repo)
    command = installed_command(cli, repo, "codex")
    git("config", "gitlease.requireClaim", "true", cwd=repo)
    result = run_hook(command, BAD_TEXT[bad], repo)
    assert "could not be read" in denial("codex", result.stdout), result


def test_a_denial_escapes_what_the_harness_shows(cli, worktrees: tuple[Path, Path]) -> None:
    """A forged owner or a file name with a right-to-left override reached the harness (and
    the user's terminal, through ``systemMessage``) raw."""
    a, b = worktrees
    prepare(a)
    owner = "ev\u202eil"
    assert cli("acquire", "owner/2", "--owner", owner, "--paths", "docs/**", cwd=b).code == 0
    command = installed_command(cli, a, "claude-code")
    doc = json.loads(payload("claude-code-pretooluse-write.json", a))
    doc["tool_input"]["file_path"] = str(a / "docs" / "a\u202etxt.md")
    result = run_hook(command, json.dumps(doc), a)
    reason = denial("claude-code", result.stdout)
    assert "\u202e" not in reason and "\\u202e" in reason, reason


def test_an_edit_inside_the_git_directory_is_judged_by_the_worktrees_claim(cli, repo: Path) -> None:
    """A file inside ``.git`` (the commit hooks, the config) was no worktree's: an agent
    whose claim lapsed could rewrite the hooks or unset ``gitlease.requireClaim``."""
    prepare(repo)
    command = installed_command(cli, repo, "claude-code")
    lapse(cli, repo)
    for inside in (".git/hooks/pre-commit", ".git/config"):
        doc = json.loads(payload("claude-code-pretooluse-write.json", repo))
        doc["tool_input"]["file_path"] = str(repo / inside)
        reason = denial("claude-code", run_hook(command, json.dumps(doc), repo).stdout)
        assert inside in reason and "expired" in reason, reason


def test_a_file_in_another_agents_bound_worktree_is_denied(
    cli, worktrees: tuple[Path, Path]
) -> None:
    """From worktree a, a file of worktree b, whose agent holds a live claim, passed as b's
    own edit (b's claim is active and b's): only b's agent edits b's files."""
    a, b = worktrees
    prepare(a)
    prepare(b)
    assert cli("acquire", "agents/b", "--ttl", "10m", cwd=b).code == 0
    command = installed_command(cli, a, "claude-code")
    doc = json.loads(payload("claude-code-pretooluse-write.json", a))
    doc["tool_input"]["file_path"] = str(b / "src" / "app.py")
    reason = denial("claude-code", run_hook(command, json.dumps(doc), a).stdout)
    assert "another agent's worktree" in reason and str(b) in reason, reason
    assert "leave them to it" in reason and "Re-acquire" not in reason, reason
    doc["tool_input"]["file_path"] = str(a / "src" / "app.py")  # (its own: not gitlease's)
    assert run_hook(command, json.dumps(doc), a).stdout == ""
    # an agent started in no worktree of its own (the folder above them): b's is not its own
    doc["cwd"] = str(a.parent)
    doc["tool_input"]["file_path"] = str(b / "src" / "app.py")
    reason = denial("claude-code", run_hook(command, json.dumps(doc), a.parent).stdout)
    assert "another agent's worktree" in reason, reason


@pytest.mark.parametrize("inside", ["worklease/scopes/index", "refs/worklease/x.lease"])
def test_an_edit_inside_the_store_is_denied(cli, repo: Path, inside: str) -> None:
    """The store's scope index, records and refs are gitlease's alone: a Write that blanked
    the index would let every scoped file be edited, committed and claimed again."""
    from conftest import store_path

    assert cli("acquire", "agents/1", "--paths", "src/**", cwd=repo).code == 0
    command = installed_command(cli, repo, "claude-code")
    doc = json.loads(payload("claude-code-pretooluse-write.json", repo))
    doc["tool_input"]["file_path"] = str(store_path(repo) / inside)
    reason = denial("claude-code", run_hook(command, json.dumps(doc), repo).stdout)
    assert "gitlease store" in reason and "never edit its files" in reason, reason


def test_a_bare_repository_with_worktrees_is_no_store(cli, tmp_path: Path) -> None:
    """A bare repository that serves worktrees (and has gitlease's per-repository folder)
    is a project, not a store: an unbound agent's edit of its files is not gitlease's."""
    bare = tmp_path / "proj.git"
    git("init", "-q", "--bare", str(bare), cwd=tmp_path)
    main = tmp_path / "proj-main"
    git("worktree", "add", "-q", "--orphan", "-b", "main", str(main), cwd=bare, check=False)
    if not main.is_dir():  # (git before 2.42 has no --orphan for worktree add)
        seed = tmp_path / "seed"
        git("init", "-q", str(seed), cwd=tmp_path)
        git("commit", "-q", "--allow-empty", "-m", "s", cwd=seed)
        git("push", "-q", str(bare), "HEAD:main", cwd=seed)
        git("worktree", "add", "-q", str(main), "main", cwd=bare)
    command = installed_command(cli, main, "claude-code")
    assert cli("hooks", "install", cwd=main).code == 0
    assert (bare / "worklease").is_dir()
    doc = json.loads(payload("claude-code-pretooluse-write.json", main))
    doc["tool_input"]["file_path"] = str(bare / "description")
    result = run_hook(command, json.dumps(doc), main)
    assert (result.returncode, result.stdout) == (0, ""), result


def test_a_file_outside_any_worktree_says_nothing(cli, repo: Path, tmp_path: Path) -> None:
    prepare(repo)
    command = installed_command(cli, repo, "claude-code")
    lapse(cli, repo)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    doc = json.loads(payload("claude-code-pretooluse-write.json", repo))
    doc["tool_input"]["file_path"] = str(outside / "scratch" / "notes.txt")
    result = run_hook(command, json.dumps(doc), repo)
    assert (result.returncode, result.stdout) == (0, ""), result


def test_a_relative_path_is_read_against_the_payload_cwd(
    cli, repo: Path, worktrees: tuple[Path, Path]
) -> None:
    a, b = worktrees
    prepare(b)
    command = installed_command(cli, a, "gemini")
    lapse(cli, b, "agents/b")
    doc = json.loads(payload("gemini-beforetool-replace.json", b))
    doc["tool_input"]["file_path"] = "src/app.py"
    assert "agents/b" in denial("gemini", run_hook(command, json.dumps(doc), a).stdout)


# ------------------------------------------------------------------ payloads it cannot read


BAD = {
    "not JSON": b"{this is not json",
    "not an object": b"[1, 2, 3]",
    "not UTF-8": b"\xff\xfe{}",
}


@pytest.mark.parametrize("harness", list(EDITS))
@pytest.mark.parametrize("bad", list(BAD))
def test_an_unreadable_payload_fails_closed_only_where_a_claim_is_bound(
    cli, repo: Path, harness: str, bad: str
) -> None:
    prepare(repo)
    command = installed_command(cli, repo, harness)
    result = run_hook(command, BAD[bad], repo)
    assert (result.returncode, result.stdout, result.stderr) == (0, "", ""), "no binding: silent"
    assert cli("acquire", R, "--ttl", "10m", cwd=repo).code == 0
    result = run_hook(command, BAD[bad], repo)
    assert result.returncode == 0 and "Traceback" not in result.stderr
    assert "could not be read" in denial(harness, result.stdout)


@pytest.mark.parametrize("harness", list(EDITS))
def test_wrong_types_in_an_edit_payload_fail_closed_where_a_claim_is_bound(
    cli, repo: Path, harness: str
) -> None:
    prepare(repo)
    command = installed_command(cli, repo, harness)
    assert cli("acquire", R, "--ttl", "10m", cwd=repo).code == 0
    doc = json.loads(payload(EDITS[harness][0], repo))
    doc["tool_input"] = {"file_path": 42, "command": ["not", "a", "patch"]}
    result = run_hook(command, json.dumps(doc), repo)
    assert "could not be read" in denial(harness, result.stdout)
    doc["cwd"] = 7  # and a cwd that is no path: the hook's own working directory counts
    assert "could not be read" in denial(harness, run_hook(command, json.dumps(doc), repo).stdout)


def test_other_events_and_tools_say_nothing(cli, repo: Path) -> None:
    prepare(repo)
    command = installed_command(cli, repo, "claude-code")
    lapse(cli, repo)
    doc = json.loads(payload("claude-code-pretooluse-edit.json", repo))
    doc["tool_name"] = "Read"
    assert run_hook(command, json.dumps(doc), repo).stdout == ""
    doc["hook_event_name"] = "PostToolUse"
    assert run_hook(command, json.dumps(doc), repo).stdout == ""


def test_a_payload_too_large_is_unreadable() -> None:
    event = payloads.parse("claude-code", b" " * (payloads.MAX_PAYLOAD + 1))
    assert event.kind == "unreadable" and "larger than" in (event.why or "")


def test_a_bad_command_line_is_usage(repo: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-I", "-m", "gitlease.agents.hook", "vim"],
        input=b"{}",
        cwd=repo,
        capture_output=True,
    )
    assert result.returncode == 2 and b"usage:" in result.stderr and not result.stdout


# ------------------------------------------------------------------ at session start


@pytest.mark.parametrize("harness", list(SESSION))
def test_session_start_names_the_claim_and_its_time_left(cli, repo: Path, harness: str) -> None:
    command = installed_command(cli, repo, harness)
    acquired = cli("acquire", R, "--ttl", "10m", "--json", cwd=repo)
    result = run_hook(command, payload(SESSION[harness], repo), repo)
    doc = json.loads(result.stdout)
    assert doc["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    text = doc["hookSpecificOutput"]["additionalContext"]
    assert R in text and acquired.json["claim_id"] in text
    assert " left)" in text and ("9m" in text or "10m" in text)
    assert f"`gitlease heartbeat {R}`" in text and f"`gitlease release {R}`" in text


def test_session_start_without_a_claim_says_to_acquire(cli, repo: Path) -> None:
    command = installed_command(cli, repo, "claude-code")
    result = run_hook(command, payload(SESSION["claude-code"], repo), repo)
    text = json.loads(result.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "holds no claim" in text and "`gitlease acquire RESOURCE" in text


def test_session_start_says_which_claims_lapsed(cli, repo: Path) -> None:
    command = installed_command(cli, repo, "gemini")
    lapse(cli, repo)
    result = run_hook(command, payload(SESSION["gemini"], repo), repo)
    text = json.loads(result.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "NOT held any more" in text and "expired" in text
    assert "holds no live claim now" in text and "holds these claims" not in text, text


# ------------------------------------------------------------------ the CLI, and leanness


def test_the_cli_command_gives_the_same_answer(cli, repo: Path) -> None:
    prepare(repo)
    command = installed_command(cli, repo, "codex")
    lapse(cli, repo)
    data = payload("codex-pretooluse-apply_patch.json", repo)
    via_cli = cli("agent-hook", "codex", cwd=repo, input=data)
    assert via_cli.code == 0

    def timeless(out: str) -> str:  # "expired ... (841ms ago)": the same but for the clock
        return re.sub(r"\([^()]* ago\)", "", out)

    assert timeless(via_cli.out) == timeless(run_hook(command, data, repo).stdout)


def test_the_edit_check_imports_neither_pygit2_click_nor_cryptography(cli, repo: Path) -> None:
    prepare(repo)
    assert cli("acquire", R, "--ttl", "10m", cwd=repo).code == 0  # bound: read and judged
    lapse(cli, repo, "agents/other")  # and a lapsed one, denied: the whole path runs
    code = (
        "import io, json, sys\n"
        "from gitlease.agents import hook\n"
        "out = io.StringIO()\n"
        "data = sys.stdin.buffer.read()\n"
        "assert hook.main(['claude-code'], io.BytesIO(data), out) == 0\n"
        "assert 'agents/other' in out.getvalue(), out.getvalue()\n"
        "heavy = ('pygit2', 'click', 'cryptography', 'typing', 'hashlib')\n"
        "print(json.dumps([m for m in heavy if m in sys.modules]))"
    )
    result = subprocess.run(
        [sys.executable, "-I", "-c", code],
        input=payload("claude-code-pretooluse-edit.json", repo),
        cwd=repo,
        capture_output=True,
        text=True,
        env=os.environ,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == []


# ------------------------------------------------------------------ install, uninstall, status


FOREIGN = {
    ".claude/settings.json": (
        b'{\n    "permissions": {"allow": ["Bash(npm test)"]},\n'
        b'    "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": '
        b'[{"type": "command", "command": "./lint.sh"}]}]}\n}'
    ),
    ".mcp.json": b'{"mcpServers": {"other": {"command": "other-server"}}}\n',
    ".codex/hooks.json": (
        b'{"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "notify"}]}]}}'
    ),
    ".codex/config.toml": b'# mine\nmodel = "gpt-5-codex"\n\n[mcp_servers.other]\ncommand = "x"\n',
    ".gemini/settings.json": (
        b'{"theme": "GitHub", "mcpServers": {"other": {"command": "o"}},\n'
        b' "hooks": {"BeforeTool": [{"matcher": "run_shell_command", "hooks": '
        b'[{"type": "command", "command": "guard"}]}]}}\n'
    ),
}


def snapshot(top: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under ``top`` but .git, with its bytes and mode."""
    found = {}
    for path in sorted(top.rglob("*")):
        if ".git" in path.relative_to(top).parts or not path.is_file():
            continue
        found[str(path.relative_to(top))] = (path.read_bytes(), path.stat().st_mode)
    return found


def folders(top: Path) -> set[str]:
    return {str(p.relative_to(top)) for p in top.rglob("*") if p.is_dir() and ".git" not in p.parts}


@pytest.mark.parametrize("harness", list(SPECS))
@pytest.mark.parametrize("existing", [True, False], ids=["foreign-settings", "none"])
def test_install_then_uninstall_leaves_the_settings_byte_identical(
    cli, repo: Path, harness: str, existing: bool
) -> None:
    if existing:
        for spec in SPECS[harness]:
            path = repo / spec.path
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(FOREIGN[spec.path])
            path.chmod(0o640)
    before, dirs = snapshot(repo), folders(repo)
    assert cli("agents", "status", harness, cwd=repo).code == 6
    assert cli("agents", "install", harness, cwd=repo).code == 0
    once = snapshot(repo)
    assert once != before
    assert cli("agents", "install", harness, cwd=repo).code == 0
    assert snapshot(repo) == once, "a second install changes nothing"
    status = cli("agents", "status", harness, "--json", cwd=repo)
    assert status.code == 0 and status.json["in_effect"] is True, status
    if existing:  # every foreign key, hook and server is still there
        for spec in SPECS[harness]:
            text = (repo / spec.path).read_text()
            for word in ("lint.sh", "other", "notify", "GitHub", "guard", "# mine"):
                if word in FOREIGN[spec.path].decode():
                    assert word in text, (spec.path, word)
    result = cli("agents", "uninstall", harness, cwd=repo)
    assert result.code == 0, result
    assert snapshot(repo) == before
    assert folders(repo) == dirs, "a folder install made is gone again"
    assert cli("agents", "status", harness, cwd=repo).code == 6


@pytest.mark.parametrize("harness", list(SPECS))
def test_uninstall_keeps_a_settings_folder_that_was_there_empty(
    cli, repo: Path, harness: str
) -> None:
    made = {(repo / s.path).parent for s in SPECS[harness]} - {repo}
    for folder in made:
        folder.mkdir()
    assert cli("agents", "install", harness, cwd=repo).code == 0
    assert cli("agents", "uninstall", harness, cwd=repo).code == 0
    assert all(folder.is_dir() and not any(folder.iterdir()) for folder in made)


def test_uninstall_after_a_change_keeps_the_change(cli, repo: Path) -> None:
    assert cli("agents", "install", "claude-code", cwd=repo).code == 0
    path = repo / ".claude" / "settings.json"
    doc = json.loads(path.read_text())
    doc["model"] = "opus"
    path.write_text(json.dumps(doc))
    assert cli("agents", "uninstall", "claude-code", cwd=repo).code == 0
    assert json.loads(path.read_text()) == {"model": "opus"}
    assert not (repo / ".mcp.json").exists()


@pytest.mark.parametrize("spec_path", [".claude/settings.json", ".mcp.json"])
def test_settings_that_are_not_json_are_refused_and_nothing_is_written(
    cli, repo: Path, spec_path: str
) -> None:
    path = repo / spec_path
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b'{"hooks": {,}')
    before = snapshot(repo)
    result = cli("agents", "install", "claude-code", "--json", cwd=repo)
    assert result.code == 2 and result.json["error"]["code"] == "USAGE", result
    assert "not valid JSON" in result.json["error"]["message"]
    assert snapshot(repo) == before


def test_status_says_what_is_missing(cli, repo: Path) -> None:
    result = cli("agents", "status", "gemini", "--json", cwd=repo)
    assert result.code == 6 and result.json["in_effect"] is False
    assert result.json["fix"] == "gitlease agents install gemini"
    assert cli("agents", "install", "gemini", cwd=repo).code == 0
    path = repo / ".gemini" / "settings.json"
    doc = json.loads(path.read_text())
    for group in doc["hooks"]["BeforeTool"]:
        for hook in group["hooks"]:
            hook["command"] = hook["command"].replace(sys.executable, "/gone/python")
    path.write_text(json.dumps(doc))
    result = cli("agents", "status", "gemini", "--json", cwd=repo)
    assert result.code == 6 and any("/gone/python" in p for p in result.json["problems"])


SWITCHES = {
    "claude-code": (".claude/settings.json", {"disableAllHooks": True}, "disableAllHooks"),
    "gemini": (".gemini/settings.json", {"hooksConfig": {"enabled": False}}, "hooksConfig"),
}


@pytest.mark.parametrize("harness", ["claude-code", "codex", "gemini"])
def test_status_sees_the_harness_switch_that_turns_hooks_off(cli, repo: Path, harness: str) -> None:
    assert cli("agents", "install", harness, cwd=repo).code == 0
    if harness == "codex":
        with (repo / ".codex" / "config.toml").open("a") as f:
            f.write("\n[features]\nhooks = false\n")
        word = "[features] hooks = false"
    else:
        name, extra, word = SWITCHES[harness]
        doc = json.loads((repo / name).read_text())
        (repo / name).write_text(json.dumps({**doc, **extra}))
    result = cli("agents", "status", harness, "--json", cwd=repo)
    assert result.code == 6 and any(word in p for p in result.json["problems"]), result
    # install does not touch the person's switch, so running it again is not the fix
    assert result.json["fix"].startswith("change by hand what the problems name")
    assert (
        f"fix: gitlease agents install {harness}"
        not in cli("agents", "status", harness, cwd=repo).err
    )


@pytest.mark.parametrize("harness", list(SPECS))
def test_install_again_follows_a_moved_python_into_the_mcp_server_entry(
    cli, repo: Path, tmp_path: Path, harness: str
) -> None:
    from gitlease.agents import settings

    before = snapshot(repo)
    python = tmp_path / "old-venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.symlink_to(sys.executable)
    settings.install(harness, cwd=repo, python=str(python))
    assert cli("agents", "status", harness, cwd=repo).code == 0
    python.unlink()  # the virtualenv the settings name is gone
    result = cli("agents", "status", harness, "--json", cwd=repo)
    assert result.code == 6, result
    assert any("MCP server" in p and str(python) in p for p in result.json["problems"]), result
    assert result.json["fix"] == f"gitlease agents install {harness}"
    result = cli("agents", "install", harness, "--json", cwd=repo)
    assert result.code == 0 and result.json["in_effect"] is True, result
    for spec in SPECS[harness]:
        assert str(python) not in (repo / spec.path).read_text(), spec.path
    assert cli("agents", "uninstall", harness, cwd=repo).code == 0
    assert snapshot(repo) == before


def test_a_server_command_relative_to_the_top_is_judged_from_the_top(cli, repo: Path) -> None:
    """A `gitlease` entry of the person's own, `./tools/gl`, is where the harness starts it
    (the top folder): neither gone when status runs in a subfolder, nor rewritten."""
    tool = repo / "tools" / "gl"
    tool.parent.mkdir()
    tool.write_text("#!/bin/sh\nexec gitlease mcp\n")
    tool.chmod(0o755)
    (repo / ".mcp.json").write_text(
        json.dumps({"mcpServers": {"gitlease": {"command": "./tools/gl"}}})
    )
    assert cli("agents", "install", "claude-code", cwd=repo).code == 0
    assert json.loads((repo / ".mcp.json").read_text())["mcpServers"]["gitlease"] == {
        "command": "./tools/gl"
    }
    result = cli("agents", "status", "claude-code", "--json", cwd=repo / "tools")
    assert result.code == 0 and result.json["in_effect"] is True, result
    tool.unlink()
    result = cli("agents", "status", "claude-code", "--json", cwd=repo / "tools")
    assert result.code == 6 and any("./tools/gl" in p for p in result.json["problems"]), result


@pytest.mark.parametrize(
    "server",
    [
        # the shape gitlease writes, with an env of the person's: rewriting only the command
        # would run gitlease with the repository's PYTHONPATH
        {"command": "/opt/old-venv/bin/gitlease", "args": ["mcp"], "env": {"PYTHONPATH": "v"}},
        {"command": "gitlease-not-on-path", "args": ["mcp"]},  # a bare name: the person's
    ],
    ids=["with-env", "bare-name"],
)
def test_a_server_entry_of_the_persons_own_is_reported_never_rewritten(
    cli, repo: Path, server: dict
) -> None:
    path = repo / ".mcp.json"
    path.write_text(json.dumps({"mcpServers": {"gitlease": server}}))
    result = cli("agents", "install", "claude-code", "--json", cwd=repo)
    assert result.code == 6, result
    assert json.loads(path.read_text())["mcpServers"]["gitlease"] == server
    assert any("not one gitlease wrote" in p for p in result.json["problems"]), result
    assert result.json["fix"].startswith("change by hand"), result  # (install cannot mend it)


def test_a_server_command_with_a_variable_is_left_to_the_harness(cli, repo: Path) -> None:
    server = {"command": "${HOME}/bin/gitlease", "args": ["mcp"]}  # Claude Code expands it
    (repo / ".mcp.json").write_text(json.dumps({"mcpServers": {"gitlease": server}}))
    assert cli("agents", "install", "claude-code", cwd=repo).code == 0
    assert json.loads((repo / ".mcp.json").read_text())["mcpServers"]["gitlease"] == server


def test_a_codex_block_without_its_end_marker_is_never_written_twice(cli, repo: Path) -> None:
    import tomllib

    assert cli("agents", "install", "codex", cwd=repo).code == 0
    path = repo / ".codex" / "config.toml"
    text = re.sub(r'^command = ".*"$', 'command = "/gone/python"', path.read_text(), flags=re.M)
    path.write_text(text.replace("# gitlease-managed: end\n", ""))
    result = cli("agents", "install", "codex", "--json", cwd=repo)
    assert result.code == 6, result
    doc = tomllib.loads(path.read_text())  # still TOML: no second [mcp_servers.gitlease]
    assert doc["mcp_servers"]["gitlease"]["command"] == "/gone/python"


def test_uninstall_takes_the_mcp_server_out_of_a_file_changed_between_installs(
    cli, repo: Path
) -> None:
    assert cli("agents", "install", "claude-code", cwd=repo).code == 0
    path = repo / ".mcp.json"
    doc = json.loads(path.read_text())
    doc["mcpServers"]["other"] = {"command": "o"}
    path.write_text(json.dumps(doc))
    assert cli("agents", "install", "claude-code", cwd=repo).code == 0
    assert cli("agents", "uninstall", "claude-code", cwd=repo).code == 0
    assert json.loads(path.read_text()) == {"mcpServers": {"other": {"command": "o"}}}


def test_install_outside_a_worktree_is_usage(cli, tmp_path: Path) -> None:
    lone = tmp_path / "lone"
    lone.mkdir()
    assert cli("agents", "install", "codex", cwd=lone).code == 2


# ------------------------------------------------------------------ the harness's own loader

_CODEX = shutil.which("codex")


def codex_home(tmp_path: Path, trusted: Path) -> dict[str, str]:
    home = tmp_path / "codex-home"
    home.mkdir()
    (home / "config.toml").write_text(f'[projects."{trusted}"]\ntrust_level = "trusted"\n')
    return {**os.environ, "CODEX_HOME": str(home)}


def harness_cli(path: str | None, name: str, package: str) -> str:
    """The harness's own CLI, or skip naming it (fail under GITLEASE_REQUIRE_HARNESSES=1, as
    in CI, which installs all three from npm)."""
    if path is None:
        message = f"no `{name}` on PATH (npm install {package})"
        if os.environ.get("GITLEASE_REQUIRE_HARNESSES") == "1":
            pytest.fail(message + "; GITLEASE_REQUIRE_HARNESSES=1 requires it")
        pytest.skip(message)
    return path


def test_codex_itself_loads_the_installed_hooks_and_server(cli, repo: Path, tmp_path: Path) -> None:
    """Codex's own loader, offline: `codex app-server` answers `hooks/list` with the hooks
    it would run here, and `codex mcp list --json` with the servers (checked: codex-cli
    0.171.0, see docs/howto/agent-harnesses.md)."""
    codex = harness_cli(_CODEX, "codex", "@openai/codex")
    env = codex_home(tmp_path, repo)
    assert cli("agents", "install", "codex", cwd=repo).code == 0
    servers = subprocess.run(
        [codex, "mcp", "list", "--json"], cwd=repo, env=env, capture_output=True, timeout=60
    )
    (server,) = [s for s in json.loads(servers.stdout) if s["name"] == "gitlease"]
    assert server["enabled"] and server["transport"]["args"] == ["mcp"]
    requests = [
        {"id": 1, "method": "initialize", "params": {"clientInfo": {"name": "t", "version": "1"}}},
        {"method": "initialized"},
        {"id": 2, "method": "hooks/list", "params": {"cwds": [str(repo)]}},
    ]
    proc = subprocess.Popen(
        [codex, "app-server"], cwd=repo, env=env, stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    try:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write("".join(json.dumps(r) + "\n" for r in requests))
        proc.stdin.flush()
        answer = None
        for line in proc.stdout:  # ends with the process: the test's timeout bounds it
            doc = json.loads(line)
            if doc.get("id") == 2:
                answer = doc["result"]["data"][0]
                break
    finally:
        proc.kill()
        proc.wait()
    assert answer is not None and answer["errors"] == [] and answer["warnings"] == []
    found = {(h["eventName"], h["matcher"]): h["command"] for h in answer["hooks"]}
    command = f"{sys.executable} -I -m gitlease.agents.hook codex"
    assert found == {("preToolUse", "apply_patch"): command,
                     ("sessionStart", "startup|resume|clear"): command}  # fmt: skip


_GEMINI = shutil.which("gemini")


def test_gemini_itself_reads_the_installed_settings(cli, repo: Path) -> None:
    """Gemini CLI's own settings loader, offline: `gemini mcp list` checks the whole
    .gemini/settings.json against Gemini's schema, hooks included ("Invalid configuration
    ... Error in: hooks.BeforeTool" otherwise), and names the server (checked: 0.61.0)."""
    gemini = harness_cli(_GEMINI, "gemini", "@google/gemini-cli")
    assert cli("agents", "install", "gemini", cwd=repo).code == 0
    listed = subprocess.run(
        [gemini, "mcp", "list"], cwd=repo, capture_output=True, text=True, timeout=120
    )
    out = listed.stdout + listed.stderr
    assert "gitlease:" in out and " mcp (stdio)" in out, out
    assert "rror" not in out, out  # no settings error or schema error


_CLAUDE = shutil.which("claude")


def test_claude_code_itself_reads_the_installed_server(cli, repo: Path) -> None:
    """Claude Code's own reading of the project's .mcp.json, offline: `claude mcp get`
    (checked: 2.1.197; it has no offline check of the hooks in .claude/settings.json, which
    the tests above feed with Claude Code's published payloads instead)."""
    claude = harness_cli(_CLAUDE, "claude", "@anthropic-ai/claude-code")
    assert cli("agents", "install", "claude-code", cwd=repo).code == 0
    shown = subprocess.run(
        [claude, "mcp", "get", "gitlease"], cwd=repo, capture_output=True, text=True, timeout=120
    )
    out = shown.stdout + shown.stderr
    assert "Project config" in out and "Type: stdio" in out and "Args: mcp" in out, out
