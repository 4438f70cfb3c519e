#!/usr/bin/env bash
# Installs what is needed, builds, and runs every test: first the normal build, then the
# same tests under AddressSanitizer and UndefinedBehaviorSanitizer.
# Set FLEET_SKIP_SANITIZE=1 to run only the normal build (a quicker local loop).
set -euo pipefail
cd "$(dirname "$0")/../.."
start=$(date +%s)

bash deploy/quickstart/install-deps.sh

echo "== build (RelWithDebInfo)"
BUILD_DIR=build bash deploy/quickstart/build.sh
echo "== test"
ctest --test-dir build --output-on-failure -j "$(nproc)" --timeout 300

if [ "${FLEET_SKIP_SANITIZE:-0}" != "1" ]; then
  echo "== build (ASan + UBSan)"
  BUILD_DIR=build-asan bash deploy/quickstart/build.sh -DFLEET_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug \
    -DFLEET_BUILD_BENCHMARKS=OFF
  echo "== test under sanitizers"
  # Every test but the attach tests on a real kernel: they run fleetd, the emulator and both
  # agents inside an emulated (TCG) guest, where the sanitizers made each take about three
  # minutes (eleven minutes of test time in all). The code they drive runs under the sanitizers here
  # anyway: the same daemons in the integration tests, the pcie-sysfs backend on the guest's
  # kernel in PcieSysfsOnRealKernelTest; and they run in the normal build above.
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir build-asan --output-on-failure -j "$(nproc)" --timeout 600 \
      -E '^OnicLayouts/AttachOnRealKernelTest\.'
fi
echo "== fuzz"
bash deploy/quickstart/fuzz.sh
echo "== all tests passed in $(( $(date +%s) - start ))s"
