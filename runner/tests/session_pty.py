"""Drives `minirun-run -i` under a pseudo-terminal (runner/tests/session.rs): two turns (the
second reuses the first from the KV cache), /reset, Ctrl-C during an answer (back to the prompt),
/exit; then a session whose context is too small for the message (a clear message, the prompt
again) ended by end of input. Python's stdlib only. Exit 0 when every expectation holds."""

import os
import pty
import re
import select
import sys
import time


class Tty:
    def __init__(self, argv):
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            os.execv(argv[0], argv)
        self.buf = b""
        self.log = b""

    def until(self, pat, timeout=300):
        end = time.time() + timeout
        while pat not in self.buf:
            left = end - time.time()
            r, _, _ = select.select([self.fd], [], [], max(0.0, left))
            if not r:
                sys.exit(f"timeout waiting for {pat!r}; output so far:\n{self.log.decode(errors='replace')}")
            try:
                data = os.read(self.fd, 4096)
            except OSError:
                sys.exit(f"end of output waiting for {pat!r}:\n{self.log.decode(errors='replace')}")
            self.buf += data
            self.log += data
        i = self.buf.index(pat) + len(pat)
        out, self.buf = self.buf[:i], self.buf[i:]
        return out.decode(errors="replace")

    def send(self, b):
        os.write(self.fd, b)

    def wait(self):
        _, status = os.waitpid(self.pid, 0)
        return os.waitstatus_to_exitcode(status)


STATS = re.compile(r"\[(\d+) tokens reused from the cache, (\d+) fed, (\d+) generated in [0-9.]+ s(, stopped by Ctrl-C)?\]")


def turn(t, text):
    t.send(text.encode() + b"\r")
    out = t.until(b"generated in")
    out += t.until(b"]")
    t.until(b"> ")
    m = STATS.search(out)
    if not m:
        sys.exit(f"no stats line after {text!r}:\n{out}")
    return int(m.group(1)), int(m.group(2)), int(m.group(3)), out


def main():
    argv = sys.argv[1:]
    t = Tty(argv + ["-n", "24", "--system", "Answer in one short sentence."])
    t.until(b"> ")
    r1, f1, g1, out1 = turn(t, "What is the capital of France?")
    if r1 != 0 or f1 < 10 or g1 < 1:
        sys.exit(f"first turn: reused {r1}, fed {f1}, generated {g1}\n{out1}")
    r2, f2, g2, out2 = turn(t, "And of Italy?")
    # The first turn (system, question, answer) is not prefilled again.
    if r2 < f1 or f2 >= r2:
        sys.exit(f"second turn reused {r2} and fed {f2} (first fed {f1}):\n{out2}")
    t.send(b"/reset\r")
    t.until(b"(conversation forgotten)")
    t.until(b"> ")
    r3, f3, _, out3 = turn(t, "What is the capital of France?")
    if r3 != 0 or f3 != f1:
        sys.exit(f"after /reset: reused {r3}, fed {f3} (first fed {f1}):\n{out3}")
    t.send(b"Write a very long story about a dragon who learns to cook.\r")
    t.until(b"cook.\r\n")
    time.sleep(0.5)
    t.send(b"\x03")
    out = t.until(b"generated in")
    out += t.until(b"]")
    if "stopped by Ctrl-C" not in out:
        sys.exit(f"Ctrl-C did not stop the answer:\n{out}")
    t.until(b"> ")
    t.send(b"/exit\r")
    code = t.wait()
    if code != 0:
        sys.exit(f"/exit ended with {code}")

    t = Tty(argv + ["-n", "8", "-c", "40"])
    t.until(b"> ")
    t.send(("tell me " * 30).encode() + b"\r")
    t.until(b"the context holds 40")
    t.until(b"> ")
    t.send(b"\x04")
    code = t.wait()
    if code != 0:
        sys.exit(f"end of input ended with {code}")
    print("session: two turns with the first reused, /reset, Ctrl-C, /exit, context limit: ok")


if __name__ == "__main__":
    main()
