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

dispatch = {
    "handshake": b"\0" + VERSION + INFO,
    "regions": b"\0" + VERSION + RINFO0 + RINFO7 + CFGREAD + CFGWRITE + BARWRITE64 + BARREAD
    + DOORBELL + MSIX + PBA,
    "dma": b"\0" + VERSION + MAP + MAP + UNMAP + UNMAP,
    "irqs": b"\0" + VERSION + IRQINFO + MASK + TRIGGER + UNMASK + DISABLE + RESET,
    "preversioned": b"\1" + MAP + RINFO0 + BARREAD + REPLY + RESET,
    "bad_major": b"\0" + msg(1, 1, struct.pack("<HH", 1, 0)),
}
caps = {
    "full": b'{"capabilities":{"max_msg_fds":8,"max_data_xfer_size":1048576,'
    b'"max_dma_maps":65535,"pgsizes":4096,"write_multiple":true,'
    b'"twin_socket":{"supported":true,"fd_index":0},"migration":{"pgsize":4096}}}\0',
    "empty": b"{}",
    "nested_unknown": b'{"x":[1,2.5e3,{"y":null}],"capabilities":{"z":"s\\u00e9"}}',
}

for name, corpus in (("fuzz_vus_dispatch", dispatch), ("fuzz_vu_caps", caps)):
    d = os.path.join("corpus", name)
    os.makedirs(d, exist_ok=True)
    for k, v in corpus.items():
        with open(os.path.join(d, k), "wb") as f:
            f.write(v)
