"""rawpg.py: a minimal Postgres wire-protocol client that sends bytes exactly as given.

For tests of what drivers never send (invalid UTF-8 in a Parse, an Execute row limit with Flush
instead of Sync, ...). Messages are (type byte, body) pairs; nothing is interpreted except the
startup handshake, which waits for the first ReadyForQuery (trust authentication only).
"""
import socket
import struct


class RawPg:
    def __init__(self, port, host="127.0.0.1", user=b"weir", database=b"weir", timeout=10):
        self.s = socket.create_connection((host, port), timeout=timeout)
        body = struct.pack("!i", 196608) + b"user\0" + user + b"\0database\0" + database + b"\0\0"
        self.s.sendall(struct.pack("!i", len(body) + 4) + body)
        self.until(b"Z")

    def msg(self, t, body=b""):
        """Sends one message of type t (one byte) with body."""
        self.s.sendall(t + struct.pack("!i", len(body) + 4) + body)

    def read(self):
        """The next message: (type, body)."""
        head = b""
        while len(head) < 5:
            head += self.s.recv(5 - len(head))
        t, n = head[:1], struct.unpack("!i", head[1:])[0]
        body = b""
        while len(body) < n - 4:
            body += self.s.recv(n - 4 - len(body))
        return t, body

    def until(self, *ends):
        """Messages up to the first of a type in ends: [(type, body)], that one included."""
        out = []
        while True:
            t, b = self.read()
            out.append((t, b))
            if t in ends:
                return out

    def until_ready(self):
        """Messages up to ReadyForQuery: the SQLSTATEs of the errors among them."""
        return error_codes(self.until(b"Z"))


def error_codes(msgs):
    """The SQLSTATEs of the ErrorResponses in msgs."""
    codes = []
    for t, b in msgs:
        if t == b"E":
            for f in b.split(b"\0"):
                if f[:1] == b"C":
                    codes.append(f[1:].decode())
    return codes
