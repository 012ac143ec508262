"""The board (docs/board.md): a real ``gitlease board`` process, read by a real headless
Chromium through Selenium, over a store of live, expired and released claims; its HTTP
surface (GET only, loopback only, ``/api/claims`` = ``list --json``); and ``list --watch``
under a real pseudo-terminal.

Chromium is Debian's ``chromium`` with ``chromium-driver`` (``.ci/run`` installs them).
Without them the browser tests are skipped, naming what is missing, except in CI
(``GITLEASE_REQUIRE_TOOLS=1``), where they fail.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import pty
import re
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import run_cli

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
NOTE = "<script>alert(1)</script>"
COLOUR = re.compile(r"\x1b\[[0-9;]*m")


def wait_for(what: str, check: Callable[[], Any], timeout: float = 60.0) -> Any:
    """Poll ``check`` until it returns something true (a state to wait on, not a margin)."""
    end = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


# ------------------------------------------------------------------ the board process


class BoardProcess:
    def __init__(self, proc: subprocess.Popen[str], url: str) -> None:
        self.proc = proc
        self.url = url
        self.port = int(url.rsplit(":", 1)[1].strip("/"))

    def get(self, path: str, method: str = "GET", host: str | None = None) -> tuple[int, Any]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            headers = {"Host": host} if host else {}
            conn.request(method, path, headers=headers)
            answer = conn.getresponse()
            return answer.status, answer
        finally:
            conn.close()

    def json(self, path: str) -> Any:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            conn.request("GET", path)
            answer = conn.getresponse()
            assert answer.status == 200, answer.status
            return json.loads(answer.read())
        finally:
            conn.close()


@contextlib.contextmanager
def board_process(
    cwd: Path, *args: str, env: dict[str, str] | None = None
) -> Iterator[BoardProcess]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "gitlease", "board", *args],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()  # the contract: the first line, flushed
        match = re.fullmatch(r"board (http://127\.0\.0\.1:\d+/)\n", first)
        assert match, (first, proc.stderr.read() if proc.poll() is not None else "")
        yield BoardProcess(proc, match.group(1))
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def claims_by_resource(cli: Callable[..., Any]) -> dict[str, dict[str, Any]]:
    got = cli("list", "--json")
    assert got.code == 0, got
    return {c["resource"]: c for c in got.json["claims"]}


@pytest.fixture
def populated(repo: Path, cli: Callable[..., Any]) -> Path:
    """A store with a live claim (renewed once, its note an HTML script), an expired one, a
    released one with a checkpoint, and one taken over after it expired."""
    assert cli("acquire", "shop/10", "--ttl", "10m", "--note", NOTE, "--receipt", "r10").code == 0
    assert cli("heartbeat", "shop/10", "--receipt", "r10").code == 0
    assert cli("acquire", "old/1", "--ttl", "1s", "--owner", "olga", "--no-bind").code == 0
    assert cli("acquire", "took/1", "--ttl", "1s", "--owner", "tom", "--no-bind").code == 0
    done = cli("acquire", "done/1", "--owner", "dora", "--no-bind", "--receipt", "rd")
    assert done.code == 0, done
    assert cli("release", "done/1", "--receipt", "rd", "--checkpoint", "PR #7").code == 0
    wait_for(
        "the short claims to expire",
        lambda: all(claims_by_resource(cli)[r]["state"] == "expired" for r in ("old/1", "took/1")),
    )
    taken = cli("acquire", "took/1", "--ttl", "10m", "--owner", "ted", "--no-bind")
    assert taken.code == 0, taken
    return repo


# ------------------------------------------------------------------ the browser


def _chromium_missing() -> str | None:
    missing = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not p.exists()]
    try:
        import selenium  # noqa: F401
    except ImportError:
        missing.append("selenium (the test extra)")
    return ", ".join(missing) or None


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Any]:
    missing = _chromium_missing()
    if missing:
        if os.environ.get("GITLEASE_REQUIRE_TOOLS") == "1":
            pytest.fail(f"GITLEASE_REQUIRE_TOOLS=1 (CI): missing {missing}")
        pytest.skip(
            f"no headless browser: missing {missing} (apt-get install chromium chromium-driver)"
        )
    os.environ["SE_AVOID_STATS"] = "true"  # Selenium sends no usage statistics
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for arg in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--window-size=1400,1000",
        f"--user-data-dir={tmp_path / 'chromium-profile'}",
    ):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    # the driver's path given: Selenium Manager never looks for one on the network
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    try:
        yield driver
    finally:
        driver.quit()


_ROWS_JS = """
return Array.from(document.querySelectorAll('#rows tr')).map(
    tr => Array.from(tr.querySelectorAll('td')).map(td => td.textContent));
"""


def _row_texts(driver: Any) -> dict[str, list[str]]:
    """Each row's cells, read in one script (the page may redraw between two reads)."""
    return {cells[0]: cells for cells in driver.execute_script(_ROWS_JS)}


def _order(driver: Any) -> list[str]:
    return [cells[0] for cells in driver.execute_script(_ROWS_JS)]


def _count(driver: Any, selector: str) -> int:
    return int(
        driver.execute_script("return document.querySelectorAll(arguments[0]).length", selector)
    )


def _text(driver: Any, selector: str) -> str | None:
    return driver.execute_script(
        "const e = document.querySelector(arguments[0]); return e ? e.textContent : null", selector
    )


def test_the_page_shows_the_store_live_and_escaped(
    populated: Path, cli: Callable[..., Any], browser: Any, tmp_path: Path
) -> None:
    from selenium.common.exceptions import NoAlertPresentException
    from selenium.webdriver.support.ui import WebDriverWait

    with board_process(populated) as board:
        browser.get(board.url)
        wait = WebDriverWait(browser, 60, poll_frequency=0.05)
        store = claims_by_resource(cli)
        wait.until(lambda d: set(_row_texts(d)) == set(store))
        rows = _row_texts(browser)
        columns = ["resource", "owner", "state"]
        for resource, claim in store.items():  # the page's text says what the store says
            shown = dict(zip(columns, rows[resource], strict=False))
            assert shown == {"resource": resource, "owner": claim["owner"], "state": claim["state"]}
        assert {r: c["state"] for r, c in store.items()} == {
            "shop/10": "active",
            "took/1": "active",
            "old/1": "expired",
            "done/1": "released",
        }
        assert rows["done/1"][9] == "PR #7"  # the checkpoint column
        assert rows["shop/10"][6] == str(populated)  # bound to the board's own worktree
        order = _order(browser)
        assert order[-1] == "done/1" and order.index("old/1") > order.index("shop/10")

        # The note is text: shown as written, no element made of it, no alert.
        note = "#rows tr[data-resource='shop/10'] td.note"
        assert _text(browser, note) == NOTE
        assert _count(browser, note + " *") == 0
        scripts = browser.execute_script(
            "return Array.from(document.scripts).map(s => s.src + '|' + s.textContent)"
        )
        assert scripts == [board.url + "board.js|"], scripts
        with pytest.raises(NoAlertPresentException):
            browser.switch_to.alert.text  # noqa: B018
        logged = browser.get_log("browser")
        assert "alert(1)" not in json.dumps(logged)
        # nothing the page does trips its own Content-Security-Policy, nor fails
        assert [e for e in logged if e["level"] == "SEVERE"] == [], logged

        # The countdown moves without a reload.
        cell = "#rows tr[data-resource='shop/10'] td.time"
        first = _text(browser, cell)
        assert first and first.startswith("expires in "), first
        wait.until(lambda d: _text(d, cell) != first)
        assert (_text(browser, cell) or "").startswith("expires in ")
        # The summary counts what the store holds.
        assert _text(browser, "#sum-active b") == "2"
        assert _text(browser, "#sum-expired b") == "1"
        assert _text(browser, "#sum-released b") == "1"

        # The timeline: one row a resource, with its segments and marks.
        def segments(resource: str, kind: str) -> int:
            return _count(browser, f"#timeline g.row[data-resource='{resource}'] {kind}")

        assert _count(browser, "#timeline svg") == 1
        assert segments("shop/10", "rect.seg.held") == 2  # acquired, then renewed
        assert segments("shop/10", "line.renew") == 1
        assert segments("old/1", "rect.seg.expired") == 1
        assert segments("took/1", "polygon.takeover") == 1
        assert segments("done/1", "rect.release") == 1

        # A claim taken after the page loaded appears without a reload.
        marker = browser.execute_script("window.__same_page = 'yes'; return window.__same_page")
        assert cli("acquire", "shop/2", "--ttl", "5m", "--owner", "sam", "--no-bind").code == 0
        wait.until(lambda d: "shop/2" in _row_texts(d))
        assert browser.execute_script("return window.__same_page") == marker
        order = _order(browser)
        assert order.index("shop/2") < order.index("shop/10")  # natural order

        # The filter box.
        box = browser.find_element("id", "filter")
        box.send_keys("dora")
        wait.until(lambda d: set(_row_texts(d)) == {"done/1"})

        shot = tmp_path / "board.png"
        box.send_keys(*["\b"] * len("dora"))  # typed away, as a person would
        wait.until(lambda d: len(_row_texts(d)) == 5)
        assert browser.save_screenshot(str(shot))
        assert shot.stat().st_size > 10_000
        print(f"board screenshot: {shot}")


# ------------------------------------------------------------------ HTTP, without a browser


def test_api_claims_is_the_list_json_document(populated: Path, cli: Callable[..., Any]) -> None:
    with board_process(populated) as board:
        status, answer = board.get("/api/claims")
        assert status == 200
        policy = answer.getheader("Content-Security-Policy")
        served = json.loads(answer.read())
    listed = cli("list", "--json").json

    def timeless(doc: dict[str, Any]) -> dict[str, Any]:
        return {"claims": [{**c, "expires_in": None} for c in doc["claims"]]}

    assert timeless(served) == timeless(listed)
    assert [c["resource"] for c in served["claims"]] == ["done/1", "old/1", "shop/10", "took/1"]
    for a, b in zip(served["claims"], listed["claims"], strict=True):
        if a["expires_in"] is not None:  # the same time left, give or take the runs between
            assert abs(a["expires_in"] - b["expires_in"]) < 60
    assert "default-src 'none'" in policy and "script-src 'self'" in policy
    assert "unsafe-inline" not in policy


def test_the_board_is_read_only_and_checks_the_host_it_is_called(
    repo: Path, cli: Callable[..., Any]
) -> None:
    assert cli("acquire", "a/1", "--no-bind").code == 0
    with board_process(repo) as board:
        for method in ("POST", "PUT", "DELETE", "PATCH", "OPTIONS"):
            status, answer = board.get("/api/claims", method)
            assert status == 405, method
            assert answer.getheader("Allow") == "GET, HEAD"
        assert board.get("/api/board")[0] == 200
        assert board.get("/nothing")[0] == 404
        # a page elsewhere whose name resolves here (DNS rebinding) gets nothing
        assert board.get("/api/claims", host="evil.example:80")[0] == 421
        assert board.get("/api/claims", host=f"localhost:{board.port}")[0] == 200
        # no token, no receipt path, in anything it serves
        served = "".join(
            board.get(p)[1].read().decode() for p in ("/api/claims", "/api/board", "/")
        )
        assert "glt_" not in served and "receipt" not in served


def test_the_page_document_is_cached_until_the_store_changes(
    repo: Path, cli: Callable[..., Any]
) -> None:
    assert cli("acquire", "a/1", "--ttl", "10m", "--no-bind").code == 0
    with board_process(repo) as board:
        _status, answer = board.get("/api/board")
        etag = answer.getheader("ETag")
        conn = http.client.HTTPConnection("127.0.0.1", board.port, timeout=30)
        conn.request("GET", "/api/board", headers={"If-None-Match": etag})
        again = conn.getresponse()
        again.read()
        assert again.status == 304  # nothing changed: nothing sent
        assert cli("acquire", "a/2", "--no-bind").code == 0
        conn.request("GET", "/api/board", headers={"If-None-Match": etag})
        changed = conn.getresponse()
        doc = json.loads(changed.read())
        conn.close()
        assert changed.status == 200 and changed.getheader("ETag") != etag
        assert [c["resource"] for c in doc["claims"]] == ["a/1", "a/2"]


def _other_address() -> str | None:
    """An address of this machine that is not loopback (None: it has none)."""
    found = set()
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        out = subprocess.run(["hostname", "-I"], capture_output=True, text=True, timeout=10)
        found.update(out.stdout.split())
    with contextlib.suppress(OSError):
        for info in socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET):
            found.add(str(info[4][0]))
    for address in sorted(found):
        if ":" not in address and not address.startswith("127."):
            return address
    return None


def test_the_board_listens_on_loopback_only(repo: Path, cli: Callable[..., Any]) -> None:
    other = _other_address()
    if other is None:
        pytest.skip("this machine has no address but loopback to try")
    with board_process(repo) as board:
        assert board.get("/api/claims")[0] == 200
        with pytest.raises(OSError), socket.create_connection((other, board.port), timeout=10):
            pass


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.0.2.1", "example.com"])
def test_a_host_other_than_loopback_is_usage(
    repo: Path, cli: Callable[..., Any], host: str
) -> None:
    got = cli("board", "--host", host, timeout=30)
    assert got.code == 2, got
    assert "loopback" in got.err and got.out == ""


def test_the_board_reads_a_remote_store_through_its_mirror(tmp_path: Path) -> None:
    from hosts import HOST_B_ENV, make_host, make_server

    server = make_server(tmp_path)
    a = make_host(server.as_uri(), tmp_path / "host-a")
    b = make_host(server.as_uri(), tmp_path / "host-b")
    assert run_cli("acquire", "remote/1", "--ttl", "10m", cwd=a).code == 0
    with board_process(a) as board:
        doc = board.json("/api/board")
        assert [c["resource"] for c in doc["claims"]] == ["remote/1"]
        assert doc["remote"] and doc["fetch_error"] is None
        got = run_cli("acquire", "remote/2", "--owner", "bea", cwd=b, env=HOST_B_ENV)
        assert got.code == 0, got

        def seen() -> bool:
            claims = board.json("/api/claims")["claims"]
            return [c["resource"] for c in claims] == ["remote/1", "remote/2"]

        wait_for("the other host's claim on the board", seen, timeout=120)


def test_the_board_names_waiters_and_keepalive_processes_live_or_dead(
    repo: Path, cli: Callable[..., Any]
) -> None:
    watched = subprocess.Popen(["sleep", "600"])
    waiter = None
    keeper = None
    try:
        assert cli("acquire", "kept/1", "--ttl", "1m").code == 0
        kept = cli("keepalive", "kept/1", "--while-pid", str(watched.pid), "--json")
        assert kept.code == 0, kept
        keeper = kept.json["keepalive"]["pid"]
        assert cli("acquire", "wanted/1", "--ttl", "10m", "--no-bind").code == 0
        waiter = subprocess.Popen(
            [sys.executable, "-m", "gitlease", "acquire", "wanted/1", "--wait", "10m", "--no-bind"],
            cwd=repo,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={**os.environ, "GITLEASE_OWNER": "patient"},
        )
        with board_process(repo) as board:

            def extra() -> dict[str, Any]:
                doc = board.json("/api/board")
                return {c["resource"]: doc["extra"][c["ref"]] for c in doc["claims"]}

            wait_for("the waiter on the board", lambda: extra()["wanted/1"]["waiters"] == 1)
            assert extra()["kept/1"]["keeper"] == {"pid": keeper, "alive": True}
            assert extra()["kept/1"]["worktree"] == str(repo)  # bound here, where the board runs
            os.kill(keeper, signal.SIGKILL)
            wait_for("the keepalive to die", lambda: not _running(keeper))
            wait_for(
                "the dead keepalive on the board",
                lambda: extra()["kept/1"].get("keeper") == {"pid": keeper, "alive": False},
            )
            waiter.kill()
            waiter.wait()
            wait_for("the waiter gone", lambda: extra()["wanted/1"]["waiters"] == 0)
    finally:
        for proc in (watched, waiter):
            if proc is not None:
                proc.kill()
                proc.wait()
        if keeper is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(keeper, signal.SIGKILL)


def _running(pid: int) -> bool:
    """Running, not a zombie."""
    from gitlease._util import procs as _procs

    proc = _procs.inspect(pid)
    return proc is not None and proc.alive


# ------------------------------------------------------------------ the timeline's events


def test_timeline_events_follow_the_records(populated: Path, store: Any) -> None:
    from gitlease.board.data import Board

    doc, _age = Board(store).page_doc()
    by = {c["resource"]: doc["timelines"][c["ref"]]["events"] for c in doc["claims"]}
    assert [e["kind"] for e in by["shop/10"]] == ["acquired", "renewed"]
    assert [e["kind"] for e in by["done/1"]] == ["acquired", "released"]
    assert by["done/1"][-1]["checkpoint"] == "PR #7"
    assert [(e["kind"], e["owner"]) for e in by["took/1"]] == [
        ("acquired", "tom"),
        ("taken over", "ted"),
    ]
    assert by["old/1"][-1].get("expired") is True
    assert doc["summary"] == {
        "active": 2,
        "expiring_soon": 0,
        "expired": 1,
        "released": 1,
        "invalid": 0,
    }


# ------------------------------------------------------------------ list --watch


class Pty:
    """A command under a real pseudo-terminal; everything it wrote, kept."""

    def __init__(self, args: list[str], cwd: Path, env: dict[str, str]) -> None:
        master, slave = pty.openpty()
        self.master = master
        self.proc = subprocess.Popen(
            args, cwd=cwd, stdin=slave, stdout=slave, stderr=slave, env=env, close_fds=True
        )
        os.close(slave)
        self.data = b""

    def read_until(self, what: str, check: Callable[[str], bool], timeout: float = 60) -> str:
        end = time.monotonic() + timeout
        while not check(self.text()):
            if time.monotonic() > end:
                raise AssertionError(f"timed out waiting for {what}: {self.text()[-2000:]!r}")
            ready, _, _ = select.select([self.master], [], [], 0.5)
            if ready:
                try:
                    self.data += os.read(self.master, 65536)
                except OSError:  # the child ended: nothing more will come
                    if self.proc.poll() is not None:
                        raise AssertionError(f"ended before {what}: {self.text()!r}") from None
        return self.text()

    def text(self) -> str:
        return self.data.decode("utf-8", "replace")

    def last_frame(self) -> str:
        return self.text().rsplit("\x1b[H", 1)[-1]

    def interrupt(self) -> int:
        self.proc.send_signal(signal.SIGINT)
        code = self.proc.wait(timeout=30)
        with contextlib.suppress(OSError):
            while select.select([self.master], [], [], 0.2)[0]:
                chunk = os.read(self.master, 65536)
                if not chunk:
                    break
                self.data += chunk
        os.close(self.master)
        return code


def _watch(repo: Path, *args: str, **env: str) -> Pty:
    full = {**os.environ, "TERM": "xterm", "COLUMNS": "160", "LINES": "40", **env}
    return Pty([sys.executable, "-m", "gitlease", "list", "--watch", *args], repo, full)


def test_list_watch_redraws_in_place_and_ends_on_ctrl_c(
    repo: Path, cli: Callable[..., Any]
) -> None:
    for resource in ("shop/10", "shop/2", "shop/1"):
        assert cli("acquire", resource, "--ttl", "10m", "--no-bind").code == 0
    assert cli("acquire", "gone/1", "--no-bind", "--receipt", "rg").code == 0
    assert cli("release", "gone/1", "--receipt", "rg", "--checkpoint", "ck-9").code == 0
    term = _watch(repo)
    try:
        term.read_until("a frame with the claims", lambda t: "shop/10" in t.rsplit("\x1b[H", 1)[-1])
        frame = term.last_frame()
        assert frame.index("shop/1 ") < frame.index("shop/2 ") < frame.index("shop/10")
        assert "gone/1" not in frame and "1 released (hidden" in frame  # released: hidden
        assert "CHECKPOINT" in frame
        assert "\x1b[32mactive" in frame  # colour on a terminal
        assert cli("acquire", "new/1", "--ttl", "10m", "--no-bind").code == 0
        term.read_until("the new claim", lambda t: "new/1" in t.rsplit("\x1b[H", 1)[-1])
        frames = term.text().count("\x1b[H")
        term.read_until("another frame", lambda t: t.count("\x1b[H") > frames + 1)
    finally:
        code = term.interrupt()
    assert code == 130, term.text()[-500:]
    out = term.text()
    assert out.count("\x1b[2J") == 1  # the screen is cleared once, never each frame
    assert "\x1b[K" in out and "\x1b[J" in out  # each frame clears what the last left over
    assert out.endswith("\x1b[?25h") or "\x1b[?25h" in out  # the cursor is shown again


def test_list_watch_all_shows_released_claims_with_their_checkpoint(
    repo: Path, cli: Callable[..., Any]
) -> None:
    assert cli("acquire", "gone/1", "--no-bind", "--receipt", "rg").code == 0
    assert cli("release", "gone/1", "--receipt", "rg", "--checkpoint", "ck-9").code == 0
    term = _watch(repo, "--all", NO_COLOR="1")
    try:
        frame_text = term.read_until("the released claim", lambda t: "gone/1" in t)
    finally:
        code = term.interrupt()
    assert code == 130
    line = next(ln for ln in frame_text.splitlines() if "gone/1" in ln)
    assert "released" in line and "ck-9" in line
    assert not COLOUR.search(term.text())  # NO_COLOR: no colour codes at all


def test_list_watch_on_a_pipe_prints_a_frame_per_change(
    repo: Path, cli: Callable[..., Any]
) -> None:
    assert cli("acquire", "p/1", "--ttl", "10m", "--no-bind").code == 0
    proc = subprocess.Popen(
        [sys.executable, "-m", "gitlease", "list", "--watch"],
        cwd=repo,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        lines = [proc.stdout.readline() for _ in range(4)]
        assert lines[0].startswith("gitlease list --watch") and "p/1" in lines[3], lines
        assert cli("acquire", "p/2", "--ttl", "10m", "--no-bind").code == 0
        more = []
        while not any("p/2" in ln for ln in more):
            more.append(proc.stdout.readline())
        assert more[0] == "\n"  # frames apart by a blank line
    finally:
        proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=30)
    assert code == 130
    assert not COLOUR.search("".join(lines + more)) and "\x1b" not in "".join(lines + more)


def test_list_watch_refuses_what_it_cannot_show(cli: Callable[..., Any]) -> None:
    for args in (["--watch", "--json"], ["--watch", "--state", "active"], ["--all"]):
        got = cli("list", *args)
        assert got.code == 2, (args, got)


def test_natural_order() -> None:
    from gitlease.cli.board import natural_key, watch_order

    names = ["shop/10", "shop/2", "a", "shop/1", "shop/2b", "b/3/10", "b/3/9"]
    assert sorted(names, key=natural_key) == [
        "a", "b/3/9", "b/3/10", "shop/1", "shop/2", "shop/2b", "shop/10"
    ]  # fmt: skip
    claims = [
        {"resource": r, "state": s}
        for r, s in [("x/1", "released"), ("x/2", "active"), ("x/10", "active"), ("x/3", "expired")]
    ]
    assert [c["resource"] for c in watch_order(claims)] == ["x/2", "x/10", "x/3", "x/1"]


@pytest.mark.parametrize(
    ("host", "address"),
    [("127.0.0.1", "127.0.0.1"), ("127.0.0.2", "127.0.0.2"), ("localhost", "127.0.0.1"),
     ("::1", "::1"), ("[::1]", "::1")],
)  # fmt: skip
def test_any_loopback_address_is_taken(host: str, address: str) -> None:
    """docs/board.md: any address of 127.0.0.0/8, or ::1 (`localhost` is 127.0.0.1)."""
    from gitlease.board.server import loopback_address

    assert loopback_address(host) == address
