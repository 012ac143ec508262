"""A push cut off at the server: the client never hears whether it landed (the remote
store's tests of settling an unanswered push)."""

from __future__ import annotations

from pathlib import Path

# Installed as the server's reference-transaction hook: when the push is about to commit
# ("prepared") or has committed ("committed"), SIGKILL the pushing `git push` process,
# so the client never hears the outcome. DROP names the moment; "prepared" also aborts.
DROP_HOOK = r"""#!/bin/sh
mode=$(cat "$GIT_DIR/drop-push" 2>/dev/null) || exit 0
[ "$1" = "$mode" ] || exit 0
pid=$$
while [ "$pid" -gt 1 ]; do
    if tr '\0' ' ' < /proc/$pid/cmdline 2>/dev/null | grep -q '^git push '; then
        kill -9 "$pid"; echo "$1" > "$GIT_DIR/push-dropped"; break
    fi
    pid=$(awk '{print $4}' /proc/$pid/stat)
done
rm -f "$GIT_DIR/drop-push"
[ "$1" = prepared ] && exit 1
exit 0
"""


def drop_next_push(server: Path, when: str) -> None:
    hook = server / "hooks" / "reference-transaction"
    hook.write_text(DROP_HOOK)
    hook.chmod(0o755)
    (server / "drop-push").write_text(when)
    (server / "push-dropped").unlink(missing_ok=True)
