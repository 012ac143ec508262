"""The documentation stays true: the CLI reference, the tutorial, and the agent skill."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import click
import pytest
from conftest import ROOT, git, run_cli

DOCS = ROOT / "docs"
CLI_MD = DOCS / "reference" / "cli.md"
GENERATOR = ROOT / "scripts" / "gen-cli-reference"
TUTORIAL = DOCS / "tutorial.md"
SKILL = ROOT / "gitlease" / "resources" / "SKILL.md"


def all_commands() -> list[tuple[str, click.Command]]:
    """(command path, command) for the root, every command and every subcommand."""
    from gitlease.cli.app import cli

    found: list[tuple[str, click.Command]] = []

    def walk(command: click.Command, path: str) -> None:
        found.append((path, command))
        if isinstance(command, click.Group):
            ctx = click.Context(command, info_name=path.rsplit(" ", 1)[-1])
            for name in command.list_commands(ctx):
                sub = command.get_command(ctx, name)
                assert sub is not None, f"`{path} {name}` is listed but cannot be loaded"
                walk(sub, f"{path} {name}")

    walk(cli, "gitlease")
    return found


def test_the_mcp_page_names_every_tool_the_server_offers() -> None:
    """The page's opening list of tools is the server's, no more and no fewer."""
    from gitlease.mcp.tools import TOOLS

    opening = (DOCS / "howto" / "mcp.md").read_text().split("\n\n")[1]
    listed = set(re.findall(r"`([a-z_]+)`", opening.split("as tools:", 1)[1].split(".", 1)[0]))
    assert listed == {t.name for t in TOOLS}


# ------------------------------------------------------------------ the CLI reference


def test_cli_reference_is_generated_from_the_current_cli() -> None:
    result = subprocess.run(
        [sys.executable, str(GENERATOR), "--stdout"], capture_output=True, text=True, check=True
    )
    assert result.stdout == CLI_MD.read_text(encoding="utf-8"), (
        "docs/reference/cli.md is out of date: run scripts/gen-cli-reference "
        "(with the project's Python) and commit the result"
    )


def _sections(text: str) -> dict[str, str]:
    sections: dict[str, str] = {}
    title = None
    for line in text.splitlines():
        if line.startswith("## "):
            title = line[3:].strip()
            sections[title] = ""
        elif title is not None:
            sections[title] += line + "\n"
    return sections


def test_every_command_and_option_is_in_the_cli_reference() -> None:
    sections = _sections(CLI_MD.read_text(encoding="utf-8"))
    commands = all_commands()
    assert len(commands) > 20
    missing = []
    for path, command in commands:
        section = sections.get(path)
        if section is None:
            missing.append(f"command `{path}`")
            continue
        first_line = (command.help or "").strip().splitlines()[:1]
        if first_line and first_line[0] not in section:
            missing.append(f"the help of `{path}`")
        for param in command.params:
            if not isinstance(param, click.Option):
                continue
            for name in [*param.opts, *param.secondary_opts]:
                if not re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", section):
                    missing.append(f"option {name} of `{path}`")
        ctx = click.Context(command, **command.context_settings)
        for name in command.get_help_option_names(ctx):
            if name not in section:
                missing.append(f"option {name} of `{path}`")
    assert not missing, "missing from docs/reference/cli.md: " + ", ".join(missing)


# ------------------------------------------------------------------ the tutorial

_BLOCK = re.compile(
    r"<!-- tutorial: (?P<cwd>\S+)(?: expect=(?P<expect>\d+))? -->\n```sh\n(?P<code>.*?)\n```",
    re.DOTALL,
)


def tutorial_blocks() -> list[tuple[str, int, str]]:
    """(directory, expected exit code, shell code) for every ```sh block, in order."""
    text = TUTORIAL.read_text(encoding="utf-8")
    blocks = [(m["cwd"], int(m["expect"] or 0), m["code"]) for m in _BLOCK.finditer(text)]
    assert len(blocks) == text.count("```sh\n"), (
        "every ```sh block in docs/tutorial.md must be preceded by <!-- tutorial: DIR -->"
    )
    return blocks


def test_tutorial_runs_as_written(tmp_path: Path) -> None:
    env = dict(os.environ)
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    blocks = tutorial_blocks()
    assert len(blocks) >= 15
    for i, (directory, expect, code) in enumerate(blocks, 1):
        cwd = (tmp_path / directory).resolve()
        result = subprocess.run(
            ["bash", "-e", "-o", "pipefail", "-c", code],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.returncode == expect, (
            f"tutorial block {i} (in {directory}) exited {result.returncode}, "
            f"expected {expect}:\n{code}\n--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}"
        )

    # The tutorial really used two linked worktrees of one repository, sharing one store.
    a, b = tmp_path / "agent-a", tmp_path / "agent-b"
    common = {
        git("rev-parse", "--path-format=absolute", "--git-common-dir", cwd=w).stdout.strip()
        for w in (a, b)
    }
    assert common == {str((tmp_path / "shop" / ".git").resolve())}
    history = run_cli("log", "github/acme/shop/2", "--json", cwd=a).json["records"]
    first = history[0]
    assert (first["revision"], first["owner"], first["state"]) == (1, "agent-b", "expired")
    assert (history[-1]["revision"], history[-1]["state"]) == (2, "released")
    listed = run_cli("list", "--json", cwd=b).json["claims"]
    assert [(c["resource"], c["state"]) for c in listed] == [
        ("github/acme/shop/1", "released"),
        ("github/acme/shop/2", "released"),
        ("github/acme/shop/3", "released"),
    ]
    assert "search: done" in (a / "search.txt").read_text()


# ------------------------------------------------------------------ the agent skill


def test_skill_prints_the_shipped_skill(tmp_path: Path) -> None:
    text = SKILL.read_text(encoding="utf-8")
    front = re.match(r"---\n(.*?)\n---\n", text, re.DOTALL)
    assert front, "SKILL.md starts with front matter"
    assert re.search(r"^name: gitlease$", front[1], re.MULTILINE)
    assert re.search(r"^description: \S", front[1], re.MULTILINE)
    for command in ("key", "free", "list", "acquire", "heartbeat", "check", "release"):
        assert f"gitlease {command}" in text
    for code in range(8):
        assert re.search(rf"^\| {code} \|", text, re.MULTILINE), f"exit code {code}"

    printed = run_cli("skill", cwd=tmp_path)
    assert printed.code == 0 and printed.out == text
    assert run_cli("skill", "--json", cwd=tmp_path).json == {"name": "gitlease", "skill": text}


def test_skill_install(tmp_path: Path) -> None:
    text = SKILL.read_text(encoding="utf-8")
    skills = tmp_path / "agent" / "skills"
    target = skills / "gitlease" / "SKILL.md"

    first = run_cli("skill", "install", str(skills), cwd=tmp_path)
    assert first.code == 0, first
    assert first.out.strip() == str(target)
    assert target.read_text(encoding="utf-8") == text

    again = run_cli("skill", "install", str(skills), "--json", cwd=tmp_path)
    assert again.code == 0 and again.json == {"path": str(target)}, "the same file: no-op"

    target.write_text("my own notes\n", encoding="utf-8")
    refused = run_cli("skill", "install", str(skills), "--json", cwd=tmp_path)
    assert refused.code == 2 and "--force" in refused.json["error"]["message"]
    assert target.read_text(encoding="utf-8") == "my own notes\n", "left alone"

    forced = run_cli("skill", "install", str(skills), "--force", cwd=tmp_path)
    assert forced.code == 0 and target.read_text(encoding="utf-8") == text


@pytest.mark.parametrize("page", sorted(p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")))
def test_docs_never_show_a_token(page: str) -> None:
    text = (DOCS / page).read_text(encoding="utf-8")
    assert not re.search(r"glt_[A-Za-z0-9_-]{20,}", text), f"{page} shows a bearer token"


# ------------------------------------------------------------------ the configuration page

CONFIGURATION = DOCS / "reference" / "configuration.md"
CODE = [
    *sorted((ROOT / "gitlease").rglob("*.py")),
    *sorted((ROOT / "gitlease" / "resources").glob("gitlease-*")),
]
#: String literals of the form "gitlease.NAME" that name a module, not a git config key.
_MODULE_LITERALS = {
    "gitlease.cli",
    "gitlease.resources",
    "gitlease.hookcheck",
    "gitlease.providers",
}


def _code_text() -> str:
    return "\n".join(path.read_text(encoding="utf-8") for path in CODE)


def code_environment_variables() -> set[str]:
    """Every GITLEASE_* name the program or its hooks mention (prefixes like GITLEASE_ aside)."""
    return {m for m in re.findall(r"\bGITLEASE_[A-Z0-9_]*[A-Z0-9]\b", _code_text())}


def code_config_keys() -> set[str]:
    """Every gitlease.* git config key the program or its hooks read (lower case, as git
    compares them): string literals, alternations in a git config regex, the hooks' git config."""
    text = _code_text()
    keys = {m.lower() for m in re.findall(r"[\"'](gitlease\.[A-Za-z]+)[\"']", text)}
    keys -= _MODULE_LITERALS
    for group in re.findall(r"gitlease\\\\?\.\(([a-z|]+)\)", text):
        keys |= {f"gitlease.{name}" for name in group.split("|")}
    keys |= {m.lower() for m in re.findall(r"--get(?:-all)? (gitlease\.[A-Za-z]+)", text)}
    return keys


def test_configuration_page_lists_every_variable_and_key_the_code_reads() -> None:
    page = CONFIGURATION.read_text(encoding="utf-8")
    listed_vars = set(re.findall(r"`(GITLEASE_[A-Z0-9_]+)[`=]", page))
    listed_keys = {k.lower() for k in re.findall(r"`(gitlease\.[A-Za-z]+)`", page)}
    variables, keys = code_environment_variables(), code_config_keys()
    # The scan finds what it must (a broken scan would pass any page).
    assert {"GITLEASE_OWNER", "GITLEASE_STORE", "GITLEASE_TESTING_BOOT_ID"} <= variables
    assert {"gitlease.store", "gitlease.remote", "gitlease.autoprune"} <= keys
    assert not variables - listed_vars, f"not on {CONFIGURATION.name}: {variables - listed_vars}"
    assert not keys - listed_keys, f"not on {CONFIGURATION.name}: {keys - listed_keys}"
    test_only = page[page.index("### Test-only") :]
    for name in sorted(variables):
        if name.startswith("GITLEASE_TESTING"):
            assert f"`{name}`" in test_only, f"{name} belongs in the test-only section"
    # Nothing listed that the program no longer knows (the test suite's own switches aside).
    suite_only = {
        "GITLEASE_REQUIRE_TOOLS",
        "GITLEASE_REQUIRE_MANAGERS",
        "GITLEASE_REQUIRE_HARNESSES",
        "GITLEASE_REQUIRE_SERVERS",
    }
    assert not listed_vars - variables - suite_only, listed_vars - variables - suite_only
    assert not listed_keys - keys, f"listed but never read: {listed_keys - keys}"


# ------------------------------------------------------------------ the skill names real commands

_SPAN = re.compile(r"`([^`\n]+)`")
_FENCE = re.compile(r"```sh\n(.*?)\n```", re.DOTALL)


def _command_tree() -> dict[str, click.Command]:
    return {path.removeprefix("gitlease").strip(): command for path, command in all_commands()}


def _invocations(text: str) -> list[list[str]]:
    """The argument lists after each `gitlease` in a code span or sh block of ``text``, and
    code spans that start with a command name (`acquire --first-free`)."""
    tree = _command_tree()
    tops = {path for path in tree if path and " " not in path}
    pieces = [line for block in _FENCE.findall(text) for line in block.splitlines()]
    pieces += _SPAN.findall(_FENCE.sub("", text))
    found = []
    for piece in pieces:
        for part in re.split(r"\||;|&&|\$\(|\)", piece.split(" #")[0]):
            words = part.split()
            if "gitlease" in words:
                found.append(words[words.index("gitlease") + 1 :])
            elif words and words[0] in tops and (len(words) > 1 or piece.strip() == part.strip()):
                found.append(words)
    return found


def test_every_command_and_option_the_skill_names_exists() -> None:
    text = SKILL.read_text(encoding="utf-8")
    tree = _command_tree()
    every_option = {name for command in tree.values() for p in command.params for name in [*p.opts]}
    problems = []
    invocations = _invocations(text)
    assert len(invocations) > 30, "the scan finds the skill's commands"
    named = set()
    for words in invocations:
        path = ""
        while words and not words[0].startswith("-") and (f"{path} {words[0]}".strip() in tree):
            path = f"{path} {words[0]}".strip()
            words = words[1:]
        if not path and words and not words[0].startswith("-") and words[0] != "...":
            problems.append(f"`gitlease {words[0]}` is no command")
            continue
        named.add(path)
        command = tree[path]
        options = {name for p in command.params for name in [*p.opts, *p.secondary_opts]}
        options |= {"--help"}
        for word in words:
            if word == "--":
                break  # exec's command follows
            if word.startswith("--"):
                option = word.split("=")[0]
                if option not in options:
                    problems.append(f"`gitlease {path}` has no option {option}")
    not_ours = re.sub(r"`git (?!lease)[^`]*`", "", text)  # `git rebase --force-rebase ...`
    for option in set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]+", not_ours)):
        if option not in every_option:
            problems.append(f"no command has the option {option}")
    assert not problems, "; ".join(sorted(set(problems)))
    for must in ("acquire", "bundle acquire", "keepalive", "exec", "heartbeat", "release"):
        assert must in named, f"the skill names `gitlease {must}`"
    for must in ("--first-free", "--no-bind", "--receipt", "--keepalive", "--ttl"):
        assert must in text
    assert "GITLEASE_OWNER" in text


def test_the_skill_names_are_checked_against_the_cli() -> None:
    """The check above catches a command or option that does not exist."""
    tree = _command_tree()
    assert "acquire" in tree and "frobnicate" not in tree
    bad = _invocations("Run `gitlease acquire x --frobnicate` and `gitlease frobnicate`.")
    assert bad == [["acquire", "x", "--frobnicate"], ["frobnicate"]]


# ------------------------------------------------------------------ how-tos run as written
#
# A how-to marks what the test runs:
#
#   <!-- doctest-setup DIR        hidden shell code, run in DIR (default: the page's root)
#   ...
#   -->
#   <!-- doctest: DIR -->         before a ```text block of `$ command` lines and their output:
#                                 each command runs in DIR, its output (stdout and stderr) must
#                                 be what the page shows, up to ids, times, durations and pids;
#                                 a command ending in `# exit N` must exit N, others 0
#   <!-- doctest: DIR -->         before a ```sh block: the block runs, and must exit 0
#
# The page's root is shown as /home/me (it is HOME: the default store lives under it). Each
# block runs with GITLEASE_OWNER set to its directory's name (agent-a in agent-a), as the
# pages say their agents do.

HOWTOS = [
    "howto/inspect.md",
    "howto/many-agents.md",
    "troubleshooting.md",
    "howto/crash-recovery.md",
    "howto/ambiguous.md",
    "howto/file-backlog.md",
    "howto/cleanup.md",
    "index.md",
]
SHOWN_ROOT = "/home/me"

_DOCTEST = re.compile(
    r"<!-- doctest-setup(?: (?P<setup_dir>\S+))?\n(?P<setup>.*?)\n-->"
    r"|<!-- doctest: (?P<dir>\S+)(?P<keep> keep)? -->\n```(?P<lang>text|sh)\n(?P<body>.*?)\n```",
    re.DOTALL,
)
_NORMALIZE = [
    (re.compile(r"stores/[^/\s']+?-[0-9a-f]{12}\.git"), "stores/STORE.git"),
    (re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z"), "TIME"),
    (re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"), "UUID"),
    (re.compile(r"\b[0-9a-f]{12,}\b"), "HEX"),
    (re.compile(r"\b1\d{9}\b"), "EPOCH"),
    (re.compile(r"\bboot-expires-ms \d+"), "boot-expires-ms N"),
    (re.compile(r"\b\d+(?:ms|s|m|h|d)(?: \d+(?:ms|s|m|h|d))*\b"), "DUR"),
    (re.compile(r"\bpid \d+"), "pid N"),
    (re.compile(r"[ \t]+"), " "),
]


def normalize(text: str, root: Path) -> list[str]:
    """The lines of ``text`` with what changes from run to run replaced by placeholders."""
    for real in {str(root), str(root.resolve())}:
        text = text.replace(real, SHOWN_ROOT)
    for pattern, placeholder in _NORMALIZE:
        text = pattern.sub(placeholder, text)
    return [line.rstrip() for line in text.strip("\n").splitlines()]


def shell_sessions(body: str) -> list[tuple[str, int, str]]:
    """(command, expected exit, expected output) for each `$ ` line of a text block."""
    sessions: list[tuple[str, int, list[str]]] = []
    for line in body.splitlines():
        if line.startswith("$ "):
            command, code = line[2:], 0
            found = re.search(r"\s+# exit (\d+)$", command)
            if found:
                command, code = command[: found.start()], int(found[1])
            sessions.append((command, code, []))
        else:
            assert sessions, f"output before any command: {line!r}"
            sessions[-1][2].append(line)
    return [(command, code, "\n".join(out)) for command, code, out in sessions]


def _doc_env(root: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "XDG_STATE_HOME"}
    env["HOME"] = str(root)
    # The hermetic git identity, where libgit2 (which reads $HOME/.gitconfig) finds it too.
    (root / ".gitconfig").write_text(Path(env["GIT_CONFIG_GLOBAL"]).read_text())
    env["GIT_CONFIG_GLOBAL"] = str(root / ".gitconfig")
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    return env


_SENTINEL = "\x1e doctest exit "


def run_block(
    commands: list[str], cwd: Path, env: dict[str, str], prelude: str = ""
) -> list[tuple[int, str]]:
    """Run ``commands`` one after the other in one shell, as a person types them (a `cd`, a
    variable, a function carries over to the next), after ``prelude``; each one's exit
    status and output (stdout and stderr together)."""
    script = [prelude, "exec 2>&1"]
    for command in commands:
        script += [command, f'printf "\\n{_SENTINEL}%s\\n" "$?"']
    done = subprocess.run(
        ["bash", "-o", "pipefail", "-c", "\n".join(script)],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        text=True,
        timeout=120,
    )
    parts = done.stdout.split(f"\n{_SENTINEL}")
    assert len(parts) == len(commands) + 1, f"the shell stopped early:\n{done.stdout}"
    results = []
    for i, part in enumerate(parts[:-1]):
        if i:
            code, _, part = part.partition("\n")
            results[-1] = (int(code), results[-1][1])
        results.append((0, part))
    results[-1] = (int(parts[-1].strip()), results[-1][1])
    return results


def run_page(page: str, root: Path) -> None:
    text = (DOCS / page).read_text(encoding="utf-8")
    env = _doc_env(root)
    steps = list(_DOCTEST.finditer(text))
    assert steps, f"{page} has no doctest blocks"
    prelude = ""
    for step in steps:
        if step["setup"] is not None:
            cwd = root / (step["setup_dir"] or ".")
            cwd.mkdir(parents=True, exist_ok=True)
            done = subprocess.run(
                ["bash", "-e", "-o", "pipefail", "-c", step["setup"]],
                cwd=cwd,
                env=env,
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert done.returncode == 0, f"{page}: setup failed:\n{step['setup']}\n{done.stderr}"
            continue
        cwd = root / step["dir"]
        if step["lang"] == "sh":
            sessions = [(step["body"], 0, None)]
        else:
            sessions = shell_sessions(step["body"])
        owner = {"GITLEASE_OWNER": cwd.resolve().name if step["dir"] != "." else "me"}
        got = run_block([command for command, _, _ in sessions], cwd, {**env, **owner}, prelude)
        for (command, code, shown), (exit_code, output) in zip(sessions, got, strict=True):
            where = f"{page}, in {step['dir']}: $ {command}"
            assert exit_code == code, f"{where}\nexited {exit_code}, expected {code}:\n{output}"
            if shown is not None:
                assert normalize(output, root) == normalize(shown, root), (
                    f"{where}\n--- the page shows\n{shown}\n--- the program printed\n{output}"
                )
        if step["keep"]:
            prelude += step["body"] + "\n"


@pytest.mark.parametrize("page", HOWTOS)
def test_howto_runs_as_written(page: str, tmp_path: Path) -> None:
    run_page(page, tmp_path)


def test_every_marked_page_is_run() -> None:
    marked = sorted(
        p.relative_to(DOCS).as_posix()
        for p in DOCS.rglob("*.md")
        if "<!-- doctest" in p.read_text(encoding="utf-8")
    )
    assert marked == sorted(HOWTOS)


def test_doctest_compares_what_it_runs(tmp_path: Path) -> None:
    """A page whose shown output differs from the program's fails (the runner is no no-op)."""
    assert shell_sessions("$ gitlease key beads bd-1\nbeads/bd-1\n$ false  # exit 1") == [
        ("gitlease key beads bd-1", 0, "beads/bd-1"),
        ("false", 1, ""),
    ]
    assert normalize(f"{tmp_path}/x c-0123456789abcdef (in 14m 59s)", tmp_path) == [
        "/home/me/x c-HEX (in DUR)"
    ]
    assert normalize("beads/bd-2", tmp_path) != normalize("beads/bd-1", tmp_path)


# ------------------------------------------------------------------ the reliability page


def test_every_test_the_reliability_page_names_exists_in_its_file() -> None:
    text = (DOCS / "reliability.md").read_text(encoding="utf-8")
    defined: dict[str, set[str]] = {}
    for path in (ROOT / "tests").rglob("test_*.py"):
        names = re.findall(r"^(?:async )?def (test_\w+)", path.read_text(encoding="utf-8"), re.M)
        # by its path and by its name alone (unique: pytest imports test files by name)
        defined[path.relative_to(ROOT).as_posix()] = defined[path.name] = set(names)
    anywhere = set().union(*defined.values())
    for cited in re.findall(r"`(tests/[\w./-]*\w)", text):
        assert (ROOT / cited).exists(), f"reliability.md names {cited}, which does not exist"
    qualified = re.findall(r"`((?:tests/(?:\w+/)*)?test_\w+\.py)::(test_\w+)", text)
    assert len(qualified) > 20
    for file, name in qualified:
        assert name in defined.get(file, ()), f"reliability.md: {file} has no {name}"
    for name in re.findall(r"(?<![:\w])`(test_[a-z0-9_]+)(?:\[[^\]`]*\])?`", text):
        assert name in anywhere, f"reliability.md names {name}, which no test file defines"


# ------------------------------------------------------------------ the README's first commands


def test_readme_starts_with_a_real_first_claim_and_the_ci_test_command() -> None:
    """The first block installs and takes a claim (and gives it back) with no setup; the second
    runs the tests exactly as `.ci/run` does (running them here would install and recurse)."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    first, second = re.findall(r"```sh\n(.*?)\n```", readme, re.DOTALL)[:2]
    assert "pip install" in first
    taken = re.search(r"gitlease acquire (\S+)", first)
    assert taken and f"gitlease release {taken[1]}" in first, "the first claim is given back"
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    test_command = second.split("&&")[-1].strip()
    assert test_command == ".venv/bin/python -m pytest -n 4"
    assert ci.rstrip().endswith(test_command), ".ci/run ends with the README's test command"
