#!/usr/bin/env python3
# Writes the seed corpora: valid messages a harness should start from.
# Run from tests/fuzz/: python3 make_seeds.py
import os
import struct


def msg(mid, cmd, body=b""):
    return struct.pack("<HHIII", mid, cmd, 16 + len(body), 0, 0) + body


VERSION = msg(1, 1, struct.pack("<HH", 0, 0) + b'{"capabilities":{"max_msg_fds":8,"pgsizes":4096}}\0')
INFO = msg(2, 4, struct.pack("<IIII", 16, 0, 0, 0))
RINFO0 = msg(3, 5, struct.pack("<IIIIQQ", 256, 0, 0, 0, 0, 0))
RINFO7 = msg(4, 5, struct.pack("<IIIIQQ", 32, 0, 7, 0, 0, 0))
CFGREAD = msg(5, 9, struct.pack("<QII", 0, 7, 64))
CFGWRITE = msg(6, 10, struct.pack("<QII", 4, 7, 2) + struct.pack("<H", 0x6))
BARWRITE64 = msg(7, 10, struct.pack("<QII", 0x40, 0, 8) + struct.pack("<Q", 0x1122334455667788))
BARREAD = msg(8, 9, struct.pack("<QII", 0x40, 0, 8))
DOORBELL = msg(9, 10, struct.pack("<QII", 0x1000, 0, 4) + struct.pack("<I", 1))
MSIX = msg(10, 10, struct.pack("<QII", 0x200c, 0, 4) + struct.pack("<I", 1))
PBA = msg(11, 9, struct.pack("<QII", 0x3000, 0, 8))
MAP = msg(12, 2, struct.pack("<IIQQQ", 32, 3, 0, 0x100000, 0x10000))
UNMAP = msg(13, 3, struct.pack("<IIQQ", 24, 0, 0x100000, 0x10000))
IRQINFO = msg(14, 7, struct.pack("<IIII", 16, 0, 2, 0))
MASK = msg(15, 8, struct.pack("<IIIII", 20, 0x1 | 0x8, 2, 0, 2))
TRIGGER = msg(16, 8, struct.pack("<IIIII", 22, 0x2 | 0x20, 2, 0, 2) + b"\x01\x00")
UNMASK = msg(17, 8, struct.pack("<IIIII", 20, 0x1 | 0x10, 2, 0, 2))
DISABLE = msg(18, 8, struct.pack("<IIIII", 20, 0x1 | 0x20, 2, 0, 0))
RESET = msg(19, 13)
REPLY = struct.pack("<HHIII", 7, 11, 16, 1, 0)
TWIN_VERSION = msg(1, 1, struct.pack("<HH", 0, 0)
                   + b'{"capabilities":{"max_msg_fds":8,"twin_socket":{"supported":true}}}\0')
UNMAP_ALL = msg(20, 3, struct.pack("<IIQQ", 24, 2, 0, 0))
FEATURE = msg(21, 16, struct.pack("<II", 16, 0) + bytes(8))


def reply(mid, cmd, body=b"", err=None):
    flags = 1 | (0x20 if err is not None else 0)
    return struct.pack("<HHIII", mid, cmd, 16 + len(body), flags, err or 0) + body


def command(mid, cmd, body=b""):
    return struct.pack("<HHIII", mid, cmd, 16 + len(body), 0, 0) + body

dispatch = {
    "handshake": b"\0" + VERSION + INFO,
    "regions": b"\0" + VERSION + RINFO0 + RINFO7 + CFGREAD + CFGWRITE + BARWRITE64 + BARREAD
    + DOORBELL + MSIX + PBA,
    "dma": b"\0" + VERSION + MAP + MAP + UNMAP + UNMAP,
    "irqs": b"\0" + VERSION + IRQINFO + MASK + TRIGGER + UNMASK + DISABLE + RESET,
    "preversioned": b"\1" + MAP + RINFO0 + BARREAD + REPLY + RESET,
    "bad_major": b"\0" + msg(1, 1, struct.pack("<HH", 1, 0)),
    "twin": b"\0" + TWIN_VERSION + MAP + UNMAP_ALL + FEATURE + BARREAD,
}
# Server side of the twin socket: byte 0 = command and length, then the client's replies.
vus_twin = {
    "read_ok": b"\0" + reply(0, 11, struct.pack("<QQ", 0x100000, 1) + b"\x42"),
    "write_ok": b"\1" + reply(0, 12, struct.pack("<QQ", 0x100000, 1)),
    "write_short_reply": b"\1" + reply(0, 12, struct.pack("<QI", 0x100000, 1)),
    "error_with_body": b"\0" + reply(0, 11, struct.pack("<QQ", 0x100000, 1) + b"\0", err=14),
    "wrong_id": b"\0" + reply(1, 11, struct.pack("<QQ", 0x100000, 1) + b"\x42"),
    "command": b"\2" + command(0, 11, struct.pack("<QQ", 0x100000, 129)),
}
# Client side of the twin socket: the server's DMA commands.
client_twin = {
    "read_write": command(1, 11, struct.pack("<QQ", 0x100000, 16))
    + command(2, 12, struct.pack("<QQ", 0x100ff8, 8) + bytes(range(8))),
    "read_only_write": command(3, 12, struct.pack("<QQ", 0x200000, 4) + b"abcd")
    + command(4, 11, struct.pack("<QQ", 0x200ffc, 8)),
    "no_reply_and_unknown": struct.pack("<HHIII", 5, 11, 32, 0x10, 0)
    + struct.pack("<QQ", 0x100000, 4) + command(6, 3),
    "reply_on_twin": reply(7, 9),
}
caps = {
    "full": b'{"capabilities":{"max_msg_fds":8,"max_data_xfer_size":1048576,'
    b'"max_dma_maps":65535,"pgsizes":4096,"write_multiple":true,'
    b'"twin_socket":{"supported":true,"fd_index":0},"migration":{"pgsize":4096}}}\0',
    "empty": b"{}",
    "nested_unknown": b'{"x":[1,2.5e3,{"y":null}],"capabilities":{"z":"s\\u00e9"}}',
}

for name, corpus in (("fuzz_vus_dispatch", dispatch), ("fuzz_vu_caps", caps),
                     ("fuzz_vus_twin", vus_twin), ("fuzz_client_twin", client_twin)):
    d = os.path.join("corpus", name)
    os.makedirs(d, exist_ok=True)
    for k, v in corpus.items():
        with open(os.path.join(d, k), "wb") as f:
            f.write(v)
