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


# Device drivers' decoders: the values each device model writes in normal operation, and the
# documented faults, so a run starts from the valid paths.
def u32(*v):
    return struct.pack("<%dI" % len(v), *v)


def u64(*v):
    return struct.pack("<%dQ" % len(v), *v)


RK_DPU0, RK_DPU1, RK_PPU0, RK_DMA_READ = 1 << 8, 1 << 9, 1 << 10, 1 << 12
RK_VERSION, RK_IN_RESET = 0x46495245, 1 << 8
# Bytes 0-1: chain length - 1; then (INTERRUPT_RAW_STATUS, TASK_STATUS) per poll.
rknpu_core_status = {
    "one_task": struct.pack("<H", 0) + u32(0, 0) + u32(RK_DPU0, 1),
    "chain_of_three": struct.pack("<H", 2) + u32(0, 0) + u32(RK_DPU0, 1) + u32(RK_DPU1, 2)
    + u32(RK_DPU0, 3),
    "dma_error": struct.pack("<H", 0) + u32(RK_DMA_READ, 0),
    "ppu_bit": struct.pack("<H", 0) + u32(RK_PPU0 | RK_DPU0, 1),
    "counter_beyond": struct.pack("<H", 1) + u32(RK_DPU0, 7),
    "gone": struct.pack("<H", 0) + u32(0xffffffff, 0xffffffff),
    "reset_and_version": struct.pack("<H", 0) + u32(RK_IN_RESET, RK_VERSION) + u32(0, 0),
}
AC_ID = 0x4E50A1C0
AC_CTRL, AC_PMU, AC_DEVMEM = 0x4000000000, 0x4000100000, 0x100000000


def ac_caps(clusters, aic=1, aiv=2, pmu=8, in_ctrl=False):
    return clusters | aic << 8 | aiv << 12 | pmu << 16 | (1 << 32 if in_ctrl else 0)


# ID, CAPS, WINDOW_STRIDE, CTRL_REG_BASE, PMU_REG_BASE, DEVMEM_BASE, DEVMEM_SIZE, PRESENT, POWER_ON.
aicore_topology = {
    "model_4_clusters": u64(AC_ID, ac_caps(4), 0x2000, AC_CTRL, AC_PMU, AC_DEVMEM, 64 << 20,
                            (1 << 12) - 1, 0, (1 << 12) - 1, 0),
    "pmu_in_ctrl_holes": u64(AC_ID, ac_caps(2, in_ctrl=True), 0x2000, AC_CTRL, AC_CTRL,
                             AC_DEVMEM, 64 << 20, 0b111011, 0, 0b101111, 0),
    "max_clusters": u64(AC_ID, ac_caps(32), 0x2000, AC_CTRL, AC_PMU, AC_DEVMEM, 64 << 20,
                        2**64 - 1, 2**32 - 1, 2**64 - 1, 2**64 - 1),
    "too_many_clusters": u64(AC_ID, ac_caps(33), 0x2000, AC_CTRL, AC_PMU, AC_DEVMEM, 1, 1, 0, 1, 0),
    "stride_too_wide": u64(AC_ID, ac_caps(32), 0x10000, AC_CTRL, AC_PMU, AC_DEVMEM, 1, 1, 0, 1, 0),
    "gone": u64(*([2**64 - 1] * 11)),
}
# Byte 0: task count - 1; bytes 1-4: the token before the first; then ops (see the harness).
aicore_dispatch = {
    "one_task": bytes([0]) + u32(0) + bytes([0, 1, 2, 5, 6]),
    "pipelined": bytes([3]) + u32(0) + bytes([0, 1, 0, 3, 0, 2, 4, 0, 0, 1, 2, 6, 0, 4, 2]),
    "near_token_max": bytes([7]) + u32(0x7FFFFF00) + bytes([0, 1, 0, 4, 0, 1, 2, 0, 0, 2]),
    "wild_cond": bytes([1]) + u32(5) + bytes([0, 7]) + u32(0xFFFFFFFE),
    "stale_ack": bytes([1]) + u32(0) + bytes([0, 2, 0, 7]) + u32(1),
}
# Byte 0 % 5: 0 record, 1 ready, 2 launch, 3 copy, 4 reset (see the harness).
def ac_record(epoch, verdict, tasks, cores):
    return u64(epoch) + u32(verdict, 0) + u64(0) + u32(tasks, cores) + u64(10, 20) + u64(0, 0)


aicore_status = {
    "record_ok": bytes([0]) + u64(7) + u32(5, 3, 5) + bytes([1]) + ac_record(7, 1, 5, 3),
    "record_before_exit": bytes([0]) + u64(7) + u32(5, 3, 5) + bytes([0]) + ac_record(7, 1, 5, 3),
    "record_error": bytes([0]) + u64(9) + u32(5, 3, 2) + bytes([0]) + ac_record(9, 2, 2, 1),
    "record_stale": bytes([0]) + u64(9) + u32(5, 3, 5) + bytes([1]) + ac_record(7, 1, 5, 3),
    "record_short": bytes([0]) + u64(3) + u32(5, 3, 5) + bytes([1]) + ac_record(3, 1, 4, 3),
    "ready_aiv": bytes([1, 3, 2, 5]) + u32(3, 5, 2),
    "ready_wrong_core": bytes([1, 3, 2, 5]) + u32(3, 4, 2),
    "launch_accepted": bytes([2]) + u64(1),
    "launch_busy": bytes([2]) + u64(3),
    "copy_done": bytes([3]) + u64(4, 5, 2),
    "copy_error": bytes([3]) + u64(4, 5, 3),
    "reset_ready": bytes([4]) + u64(0, 0),
    "reset_poisoned": bytes([4]) + u64(2, 1),
    "reset_gone": bytes([4]) + u64(2**64 - 1, 2**64 - 1),
}
ET_DEADFEED = 0xDEADFEEDDEADFEED
# Byte 0 bit 0 clear: (value, mask, want) triples, read again as error snapshots of 4 values.
edgetpu_status = {
    "bring_up": b"\0" + u64(16, 1, 0) + u64(1, 1, 1) + u64(0, 2**64 - 1, 0)
    + u64(ET_DEADFEED, 1, 1),
    "gone": b"\0" + u64(2**64 - 1, 2**64 - 1, 2**64 - 1, 0),
    "errors": b"\0" + u64(0x20, 0x1000, 0, 3) + u64(ET_DEADFEED, 0, 0, 0),
    # Bit 0 set: SC_HOST_0 counter at open, then (op, n) steps.
    "sc_host_honest": b"\1" + u32(0xFFF0) + bytes([0, 40, 0, 1, 20, 0, 2, 10, 0, 1, 20, 0,
                                                    2, 30, 0]),
    "sc_host_no_irq": b"\1" + u32(5) + bytes([0, 8, 0, 2, 0, 0, 1, 8, 0, 2, 8, 0]),
    "sc_host_wild": b"\1" + u32(0) + bytes([0, 4, 0, 1, 4, 0, 3, 0x34, 0x12, 2, 4, 0,
                                             3, 0, 0x80]),
}

for name, corpus in (("fuzz_vus_dispatch", dispatch), ("fuzz_vu_caps", caps),
                     ("fuzz_vus_twin", vus_twin), ("fuzz_client_twin", client_twin),
                     ("fuzz_rknpu_core_status", rknpu_core_status),
                     ("fuzz_aicore_topology", aicore_topology),
                     ("fuzz_aicore_dispatch", aicore_dispatch),
                     ("fuzz_aicore_status", aicore_status),
                     ("fuzz_edgetpu_status", edgetpu_status)):
    d = os.path.join("corpus", name)
    os.makedirs(d, exist_ok=True)
    for k, v in corpus.items():
        with open(os.path.join(d, k), "wb") as f:
            f.write(v)
