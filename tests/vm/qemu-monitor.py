#!/usr/bin/env python3
"""qemu-monitor.py SOCKET CMD...: run each command on QEMU's human monitor
(-monitor unix:SOCKET,server,nowait) and print its output, for the stall
dump of run-guest.sh. Every read has a deadline: a wedged QEMU must not hang
the harness."""
import socket
import sys
import time

PROMPT = b"(qemu) "


def read_until_prompt(s, deadline):
    buf = b""
    while not buf.endswith(PROMPT):
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("no monitor prompt")
        s.settimeout(left)
        chunk = s.recv(65536)
        if not chunk:
            break
        buf += chunk
    return buf


def main():
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(10)
    s.connect(sys.argv[1])
    read_until_prompt(s, time.monotonic() + 10)
    for cmd in sys.argv[2:]:
        s.sendall(cmd.encode() + b"\n")
        out = read_until_prompt(s, time.monotonic() + 20)
        text = out.decode(errors="replace").replace("\r", "")
        # the echo of the command comes first, the prompt last
        # readline redraws the echo with escape sequences
        lines = [l for l in text.split("\n") if not l.startswith("(qemu)") and "\x1b" not in l]
        print(f"## {cmd}")
        print("\n".join(lines).strip("\n"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
