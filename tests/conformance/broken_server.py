"""A deliberately broken QMD server: a stdio proxy in front of a real one.

    python broken_server.py [--path-prepend DIR] -- <server argv…>

It forwards every line both ways, except that in the first answer whose first content text
starts with "Found " it changes one character ("Found" -> "Fount"). The conformance runner
must catch that single character.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from typing import IO, Any


def _corrupt(line: bytes, state: dict[str, bool]) -> bytes:
    if state["done"]:
        return line
    try:
        msg: Any = json.loads(line)
        text = msg["result"]["content"][0]["text"]
    except (ValueError, KeyError, IndexError, TypeError):
        return line
    if not isinstance(text, str) or not text.startswith("Found "):
        return line
    state["done"] = True
    msg["result"]["content"][0]["text"] = "Fount " + text[len("Found ") :]
    return json.dumps(msg, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


def _pump_out(src: IO[bytes], dst: IO[bytes]) -> None:
    state = {"done": False}
    for line in iter(src.readline, b""):
        dst.write(_corrupt(line, state))
        dst.flush()


def main(argv: list[str]) -> int:
    if "--" not in argv:
        print(__doc__, file=sys.stderr)
        return 2
    opts, child = argv[: argv.index("--")], argv[argv.index("--") + 1 :]
    env = dict(os.environ)
    if "--path-prepend" in opts:
        env["PATH"] = opts[opts.index("--path-prepend") + 1] + os.pathsep + env.get("PATH", "")
    proc = subprocess.Popen(child, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
    assert proc.stdin is not None and proc.stdout is not None
    out = threading.Thread(target=_pump_out, args=(proc.stdout, sys.stdout.buffer))
    out.start()
    for line in iter(sys.stdin.buffer.readline, b""):
        proc.stdin.write(line)
        proc.stdin.flush()
    proc.stdin.close()  # stdin EOF is the server's shutdown signal: pass it on
    rc = proc.wait()
    out.join()
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
