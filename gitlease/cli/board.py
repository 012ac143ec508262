"""``gitlease board`` (the live web page, docs/board.md) and ``gitlease list --watch`` (the
same view in a terminal)."""

from __future__ import annotations

import re
import shutil
import sys
import threading
import time
from typing import Any

import click

from ..api.output import format_duration, printable
from . import jsonout, output
from .app import Options, cli, command, open_store

#: How often ``list --watch`` redraws (the countdowns tick; the store is re-read only
#: when it changed, as the board does).
WATCH_INTERVAL_SECONDS = 0.5

_STATE_ORDER = {"active": 0, "expired": 1, "invalid": 2, "released": 3, "free": 4}
_DIGITS = re.compile(r"(\d+)")


def natural_key(text: str) -> tuple[Any, ...]:
    """``shop/2`` before ``shop/10``: runs of digits compare as numbers."""
    return tuple(
        (1, int(part), part) if part.isdigit() else (0, 0, part)
        for part in _DIGITS.split(text)
        if part
    )


def watch_order(claims: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Active first, then expired, invalid, released; each in natural order."""
    return sorted(
        claims, key=lambda c: (_STATE_ORDER.get(c["state"], 9), natural_key(c["resource"]))
    )


def _time_text(claim: dict[str, Any], elapsed: float) -> str:
    left = claim.get("expires_in")
    state = claim["state"]
    if left is not None and state == "active":
        left -= elapsed
        if left > 0:
            return f"expires in {format_duration(int(left * 1000))}"
        return "expiring now"
    return output.relative(claim)


def watch_frame(
    doc: dict[str, Any], *, show_all: bool, colour: bool, elapsed: float, width: int
) -> list[str]:
    """One frame of ``list --watch``: a summary line and the table (already escaped)."""
    claims: list[dict[str, Any]] = doc["claims"]
    extra: dict[str, dict[str, Any]] = doc.get("extra", {})
    summary = doc["summary"]
    shown = [c for c in claims if show_all or c["state"] != "released"]
    head = (
        f"gitlease list --watch  {time.strftime('%H:%M:%S')}  "
        f"{summary['active']} active, {summary['expiring_soon']} expiring soon, "
        f"{summary['expired']} expired, {summary['released']} released"
        + ("" if show_all or not summary["released"] else " (hidden; --all shows them)")
    )
    if doc.get("fetch_error"):
        head += f"  [remote unreachable: {printable(doc['fetch_error'])}]"
    lines = [head[:width], ""]
    if not shown:
        return [*lines, "no claims"]
    header = ["RESOURCE", "STATE", "OWNER", "TIME", "MODE", "CHECKPOINT", "KEPT BY", "WAITERS"]
    ordered = watch_order(shown)
    rows = []
    for c in ordered:
        info = extra.get(c["ref"], {})
        keeper = info.get("keeper")
        kept = ""
        if keeper is not None:
            kept = f"pid {keeper['pid']}" + ("" if keeper["alive"] else " (dead)")
        rows.append(
            [
                printable(c["resource"]),
                c["state"],
                printable(c["owner"] or ""),
                _time_text(c, elapsed),
                c["mode"] or "",
                printable(c["checkpoint"] or ""),
                kept,
                str(info["waiters"]) if info.get("waiters") else "",
            ]
        )
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    titles = "  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)).rstrip()
    lines.append(titles[:width])
    for row, c in zip(rows, ordered, strict=True):
        text = "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        text = text[:width]
        start = widths[0] + 2
        if colour and len(text) > start:  # paint the STATE cell only (never cut a code)
            cell = text[start : start + widths[1]]
            text = text[:start] + output.paint(cell, c["state"], True) + text[start + len(cell) :]
        lines.append(text)
    return lines


def watch(opts: Options, show_all: bool) -> int:
    """``list --watch``: redraw the table in place on a terminal; on another stdout, print
    one frame each time the claims change (docs/board.md)."""
    from ..board.data import Board

    board = Board(open_store(opts), timelines=False)  # (the table draws no timeline)
    out = sys.stdout
    tty = out.isatty()
    colour = output.use_colour(out)
    last_seen: Any = None
    drawn = 0
    try:
        if tty:
            out.write("\033[?25l\033[H\033[2J")  # hide the cursor; clear once, at the start
        while True:
            doc, age = board.page_doc()
            if tty:
                width = max(20, shutil.get_terminal_size().columns)
                frame = watch_frame(
                    doc,
                    show_all=show_all,
                    colour=colour,
                    elapsed=age,
                    width=width,
                )
                # home, then each line cleared to its end, then the rest of the screen
                text = "\033[H" + "".join(output.safe_text(line) + "\033[K\n" for line in frame)
                out.write(text + "\033[J")
                out.flush()
            else:
                seen = [(c["ref"], c["oid"], c["state"]) for c in doc["claims"]]
                if seen != last_seen:
                    last_seen = seen
                    frame = watch_frame(
                        doc, show_all=show_all, colour=False, elapsed=0.0, width=10_000
                    )
                    out.write(("\n" if drawn else "") + output.safe_text("\n".join(frame)) + "\n")
                    out.flush()
                    drawn += 1
            time.sleep(WATCH_INTERVAL_SECONDS)
    finally:
        if tty:
            out.write("\033[?25h")
            out.flush()


@command(cli, "board")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=0,
    show_default=True,
    help="The port to listen on (0: a free one).",
)
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="A loopback address to listen on (127.0.0.1, another of 127.0.0.0/8, or ::1); any "
    "other is refused.",
)
@click.option("--open", "open_", is_flag=True, help="Open the page in a web browser.")
def board(opts: Options, port: int, host: str, open_: bool) -> None:
    """Serve a live, read-only web page of every claim on this machine's loopback interface.

    Prints `board http://127.0.0.1:PORT/` first, then serves until interrupted. The page
    updates within a second of any change; `/api/claims` serves the `list --json` document.
    """
    from ..board.data import Board
    from ..board.server import loopback_address, make_server, url

    loopback_address(host)  # USAGE before anything is opened
    server = make_server(Board(open_store(opts)), host, port)
    try:
        address = url(server)
        if opts.json:
            jsonout.print_json({"url": address})
        else:
            click.echo(f"board {address}")
        sys.stdout.flush()
        if open_:
            import webbrowser

            threading.Thread(target=webbrowser.open, args=(address,), daemon=True).start()
        server.serve_forever(poll_interval=0.5)
    finally:
        server.server_close()
