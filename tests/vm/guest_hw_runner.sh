#!/bin/sh
# guest_hw_runner.sh (busybox sh, in the guest): scripts/run-hw-tests.sh, the
# hardware runner's entry point (issue 26), against QEMU's edu with the
# generic kernel-VFIO suites (guest_env, guest_caller_memory) run by ctest:
#   1. as root, edu unbound: the runner binds it, reserves hugepages, runs the
#      suites, writes JUnit and the JSON record (edu's ids and revision, its
#      identification register read by `npuvfio info --open`, the backend the
#      library chose, each TAP case), and gives edu and the pool back;
#   2. killed with SIGTERM while a test runs: edu and the pool are given back,
#      the test's process is gone;
#   3. as an unprivileged user given the group's node (what
#      packaging/udev/70-npuvfio.rules does) and a memlock limit: edu already
#      on vfio-pci is run and left bound; without the node's group the
#      library's error names the node and the fix.
# run-guest.sh puts bash, ctest, the CLI, the runner and the suites in /bin
# (--tool); this program builds a one-file ctest tree for them.
n=0 failed=0
ok() { n=$((n + 1)); echo "ok $n - $*"; }
nok() { n=$((n + 1)); failed=$((failed + 1)); echo "not ok $n - $*"; }
check() { # check DESCRIPTION COMMAND...
  d=$1; shift
  if "$@"; then ok "$d"; else nok "$d"; return 1; fi
}
show() { sed 's/^/# /' "$@"; }
EDU=$NPVTEST_EDU
drv() { basename "$(readlink "/sys/bus/pci/devices/$EDU/driver" 2>/dev/null)" 2>/dev/null; }
hp() { cat /proc/sys/vm/nr_hugepages; }
grp=$(basename "$(readlink "/sys/bus/pci/devices/$EDU/iommu_group")")

# ctest finds its CMAKE_ROOT beside itself (/bin/../share/cmake-X.Y).
v=$(ctest --version 2>/dev/null | sed -n 's/^ctest version \([0-9]*\.[0-9]*\).*/\1/p')
mkdir -p "/share/cmake-$v/Modules" && : >"/share/cmake-$v/Modules/CMake.cmake"

# The runner is a bash script; the guest's /usr/bin/env is absent, so bash is named.
RUN="bash /bin/run-hw-tests.sh"

tree() { # tree DIR TEST-LINES: a ctest build tree
  mkdir -p "$1" && printf '%s\n' "$2" >"$1/CTestTestfile.cmake"
}
SUITES='add_test(guest_env "/bin/guest_env")
set_tests_properties(guest_env PROPERTIES LABELS "hw;edu" TIMEOUT 120)
add_test(guest_caller_memory "/bin/guest_caller_memory")
set_tests_properties(guest_caller_memory PROPERTIES LABELS "hw;edu" TIMEOUT 120)
add_test(model_only "/bin/sh" "-c" "echo SKIPPED: needs a model; exit 77")
set_tests_properties(model_only PROPERTIES LABELS "hw;edu" SKIP_RETURN_CODE 77)'
tree /tmp/hwb "$SUITES"

# /init bound edu with the CLI; the runner starts from a device on no driver.
npuvfio unbind "$EDU" >/dev/null 2>&1
hp0=$(hp)
check "edu starts unbound (driver '$(drv)'), $hp0 hugepages" [ -z "$(drv)" ]

# ---- 1. root, a full run -------------------------------------------------------------
want_hp=$((hp0 + 2))
# NPUVFIO_IOMMU unset: the library chooses (auto); the record says which it took.
env -u NPUVFIO_IOMMU $RUN --cli /bin/npuvfio --build /tmp/hwb --out /tmp/hwo --hugepages "$want_hp" \
  "edu=$EDU" >/tmp/run1.log 2>&1
rc=$?
check "root run exits 0 (rc=$rc)" [ $rc -eq 0 ] || show /tmp/run1.log /tmp/hwo/ctest-edu.log
check "the runner bound edu to vfio-pci (was unbound)" grep -q "bound to vfio-pci (was unbound)" /tmp/run1.log
check "the runner grew the pool to $want_hp" grep -q "reserved $want_hp" /tmp/run1.log
J=/tmp/hwo/junit-edu-$(echo "$EDU" | tr : _).xml
check "JUnit names guest_env and guest_caller_memory passed, model_only skipped" \
  sh -c "grep -q 'testcase name=\"guest_env\".*status=\"run\"' $J &&
         grep -q 'testcase name=\"guest_caller_memory\".*status=\"run\"' $J &&
         grep -q 'testcase name=\"model_only\".*status=\"notrun\"' $J"
R=/tmp/hwo/hw-record.json
check "the record has edu's ids, the kernel, the IOMMU and each test's result" \
  sh -c "grep -q '\"vendor\": \"0x1234\"' $R && grep -q '\"device\": \"0x11e8\"' $R &&
         grep -q '\"kernel\": \"$(uname -r)\"' $R && grep -q '\"iommu\": \"dmar0\"' $R &&
         grep -q '{\"name\": \"guest_env\", \"result\": \"passed\"' $R"
# edu: PCI revision 0x10 (hw/misc/edu.c edu_class_init), identification 0x010000ed (edu_mmio_read).
check "the record has edu's revision from sysfs and from config space, and its identification register" \
  sh -c "grep -q '\"revision\": \"0x10\"' $R &&
         grep -q '\"identity\": {\"kind\":\"edu\",\"read\":true,\"pci_revision\":\"0x10\",\"version\":\"1.0\"' $R &&
         grep -q '{\"name\":\"identification\",\"region\":0,\"offset\":\"0x0\",\"width\":4,\"value\":\"0x010000ed\"}' $R" ||
  grep -a '"identity' $R | sed 's/^/# /'
check "the record has the backend the library chose (asked: auto)" \
  sh -c "grep -q '\"backend_requested\": \"auto\"' $R && grep -Eq '\"backend\": \"(legacy|iommufd)\", \"identity\"' $R"
check "the record has each TAP case of guest_env and the model-only suite as skipped" \
  sh -c "grep -q '{\"suite\": \"guest_env\", \"name\": \"$NPVTEST_BACKEND: guest found edu' $R &&
         grep -q '{\"suite\": \"model_only\", \"name\": \"model_only\", \"tcase\": null, \"result\": \"skipped\"' $R"
check "edu is unbound again after the run (driver '$(drv)')" [ -z "$(drv)" ]
check "the pool is back to $hp0 ($(hp))" [ "$(hp)" -eq "$hp0" ]
# Per case: guest_env's and guest_caller_memory's TAP lines (more than the 2 suites), none failed, model_only skipped.
check "the summary line counts cases" grep -Eq "^edu +$EDU +passed +([3-9]|[1-9][0-9]) +0 +1  " /tmp/run1.log
grep -a "^edu \|^hardware run\|identity:" /tmp/run1.log | sed 's/^/# /'

# ---- 2. SIGTERM while a test runs -----------------------------------------------------
tree /tmp/hwk 'add_test(sleeper "/bin/sh" "-c" "echo $$ >/tmp/sleeper.pid; exec sleep 120")
set_tests_properties(sleeper PROPERTIES LABELS "hw;edu" TIMEOUT 200)'
rm -f /tmp/sleeper.pid
$RUN --cli /bin/npuvfio --build /tmp/hwk --out /tmp/hwko --hugepages "$want_hp" \
  "edu=$EDU" >/tmp/run2.log 2>&1 &
rpid=$!
i=0
while [ ! -s /tmp/sleeper.pid ] && [ $i -lt 300 ]; do sleep 0.2; i=$((i + 1)); done
check "mid-test: edu on vfio-pci ($(drv)), pool $(hp)" [ "$(drv)" = vfio-pci ] && [ "$(hp)" -eq "$want_hp" ]
kill -TERM "$rpid"
wait "$rpid"
rc=$?
check "the runner exits 143 on SIGTERM (rc=$rc)" [ $rc -eq 143 ] || show /tmp/run2.log
check "after SIGTERM edu is unbound again (driver '$(drv)')" [ -z "$(drv)" ]
check "after SIGTERM the pool is back to $hp0 ($(hp))" [ "$(hp)" -eq "$hp0" ]
sp=$(cat /tmp/sleeper.pid 2>/dev/null)
check "the test's process ($sp) is gone" sh -c "[ -n '$sp' ] && ! kill -0 '$sp' 2>/dev/null"
check "the record says interrupted" grep -q '"interrupted": "SIGTERM"' /tmp/hwko/hw-record.json

# ---- 3. an unprivileged runner --------------------------------------------------------
mkdir -p /etc && echo "root:x:0:0::/:/bin/sh" >/etc/passwd
echo "runner:x:1000:1000::/tmp/runner:/bin/sh" >>/etc/passwd
printf 'root:x:0:\nnpuvfio:x:1000:runner\n' >/etc/group
mkdir -p /tmp/runner && chown 1000:1000 /tmp/runner
npuvfio bind "$EDU" >/dev/null 2>&1
as_runner() { # as uid 1000 (busybox su as root asks no password), memlock limited
  (ulimit -l 65536 && su runner -s /bin/sh -c "$*")
}
# Without access to the group's node: the library names it and the fix.
as_runner env NPUVFIO_IOMMU="$NPVTEST_BACKEND" npuvfio info --open "$EDU" >/tmp/run3a.log 2>&1
rc=$?
check "non-root without the node: refused (rc=$rc), the error names /dev/vfio and the fix" \
  sh -c "[ $rc -ne 0 ] && grep -q '/dev/vfio/.*: Permission denied: uid 1000 may not open it; give this user the node.s group (udev rule packaging/udev/70-npuvfio.rules' /tmp/run3a.log" ||
  show /tmp/run3a.log
grep -a "may not open" /tmp/run3a.log | sed 's/^/# /'
# What the udev rule does: the group's nodes to group npuvfio, mode 0660.
for f in "/dev/vfio/$grp" /dev/vfio/devices/* /dev/iommu; do
  [ -c "$f" ] && chgrp 1000 "$f" && chmod 0660 "$f"
done
chmod 0666 /dev/vfio/vfio
chown -R 1000:1000 /tmp/hwb # the CI user's own build tree (ctest writes Testing/ in it)
as_runner env NPUVFIO_IOMMU="$NPVTEST_BACKEND" $RUN --cli /bin/npuvfio --build /tmp/hwb --out /tmp/runner/out "edu=$EDU" \
  >/tmp/run3.log 2>&1
rc=$?
check "non-root run (uid 1000, group's node by udev rule, memlock 64 MiB) exits 0 (rc=$rc)" [ $rc -eq 0 ] ||
  show /tmp/run3.log /tmp/runner/out/ctest-edu.log
check "non-root: edu already on vfio-pci is left as is" grep -q "already on vfio-pci, left as is" /tmp/run3.log
check "non-root: the record names the user and the memlock limit" \
  sh -c "grep -q '\"user\": \"runner\"' /tmp/runner/out/hw-record.json && grep -q '\"memlock_kib\": \"65536\"' /tmp/runner/out/hw-record.json"
check "non-root: the record has the backend asked ($NPVTEST_BACKEND) and chosen, and edu's identity" \
  sh -c "grep -q '\"backend_requested\": \"$NPVTEST_BACKEND\"' /tmp/runner/out/hw-record.json &&
         grep -q '\"backend\": \"$NPVTEST_BACKEND\", \"identity\": {\"kind\":\"edu\",\"read\":true' /tmp/runner/out/hw-record.json" ||
  grep -a '"backend\|identity' /tmp/runner/out/hw-record.json | sed 's/^/# /'
check "non-root: edu still on vfio-pci ($(drv))" [ "$(drv)" = vfio-pci ]
[ $failed -eq 0 ]
