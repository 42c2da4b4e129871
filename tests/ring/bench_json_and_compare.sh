#!/usr/bin/env bash
# npuvfio-bench's JSON and --compare, on a short run: the JSON parses, holds
# every repetition, the six targets and a row per device with its register
# accesses per job; --compare against a baseline with
# inflated ratios warns loudly about each and still exits 0; an unreadable
# baseline fails before anything is measured.
#   bench_json_and_compare.sh BENCH
set -euo pipefail
bench=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
base=(--quick --reps 2 --mode poll,hybrid --qd 2,32)
short=("${base[@]}" --no-devices)

# The first run keeps the device rows: every device of the table is a row.
"$bench" "${base[@]}" --json "$tmp/run.json" >"$tmp/run.out" 2>&1 ||
    { cat "$tmp/run.out"; echo "FAIL: the short run failed"; exit 1; }
python3 - "$tmp/run.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
names = [t["name"] for t in d["targets"]]
want = ["qd1_rtt_vs_cacheline", "qd32_rate_vs_same_work_rte_ring", "lines_vs_bound_qd32",
        "lines_vs_bound_qd256", "hybrid_vs_poll_qd32", "syscalls_per_round_trip"]
assert names == want, names
assert d["run"]["reps"] == 2, d["run"]
mem = next(m for m in d["ours"].values() if m["ran"])
for mode in ("poll", "hybrid"):
    for qd in ("2", "32"):
        assert len(mem["modes"][mode]["rate_per_s"][qd]["reps"]) == 2, (mode, qd)
        assert len(mem["modes"][mode]["per_job"][qd]["wakeups"]["reps"]) == 2, (mode, qd)
assert "irq" not in mem["modes"]
devs = {x["name"]: x for x in d["devices"]}
assert "testdev" in devs and "skipped" not in devs["testdev"], devs
for x in devs.values():
    assert "skipped" in x or (len(x["per_s"]["reps"]) == 2 and x["mismatches"] == 0), x
    # Register accesses per job beside the latency (issue 25): every device touches some
    # (testdev and edgetpu only write their doorbell; completions come back in memory).
    assert "skipped" in x or (len(x["reads_per_job"]["reps"]) == 2 and
                              x["reads_per_job"]["median"] + x["writes_per_job"]["median"] > 0 and
                              "trapped_reads_per_job" in x and
                              x["steady_per_job"]["writes"] is not None), x
sw = d["peers"]["same_work_rte_ring_per_s"]
assert sw is None or all(sw[q] is None or len(sw[q]["reps"]) == 2 for q in ("2", "32")), sw
PY

# A baseline whose ratios today cannot come near. The QD1 ratio is the one a
# starved run still measures (its samples never run out), so it is checked.
python3 - "$tmp/run.json" "$tmp/inflated.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for t in d["targets"]:
    t["value"] = {"qd1_rtt_vs_cacheline": 1e-9, "syscalls_per_round_trip": 0}.get(t["name"], 1e9)
    # A baseline from before issue 25 names the retired target instead.
    if t["name"] == "lines_vs_bound_qd32":
        t["name"] = "rate_vs_io_uring_nop"
json.dump(d, open(sys.argv[2], "w"), indent=1)
PY
"$bench" "${short[@]}" --compare "$tmp/inflated.json" >"$tmp/cmp.out" 2>"$tmp/cmp.err" ||
    { cat "$tmp/cmp.out" "$tmp/cmp.err"; echo "FAIL: a worse ratio must not fail the run"; exit 1; }
grep -q "qd1_rtt_vs_cacheline.*WORSE BY MORE THAN A THIRD" "$tmp/cmp.out" ||
    { cat "$tmp/cmp.out"; echo "FAIL: no loud line for the worse ratio"; exit 1; }
grep -q "WARNING: qd1_rtt_vs_cacheline went from" "$tmp/cmp.err" ||
    { cat "$tmp/cmp.err"; echo "FAIL: no warning on stderr"; exit 1; }
grep -q "lines_vs_bound_qd32 .*replaces rate_vs_io_uring_nop: not compared" "$tmp/cmp.out" ||
    { cat "$tmp/cmp.out"; echo "FAIL: --compare does not know the renamed target"; exit 1; }
if grep -q "WARNING: lines_vs_bound_qd32" "$tmp/cmp.err"; then
    echo "FAIL: the retired target was compared with its replacement"; exit 1
fi

if "$bench" "${short[@]}" --compare "$tmp/missing.json" >"$tmp/miss.out" 2>&1; then
    echo "FAIL: an unreadable --compare file was accepted"; exit 1
fi
if grep -q "plan:" "$tmp/miss.out"; then
    echo "FAIL: it measured before refusing the --compare file"; exit 1
fi
echo "ok"
