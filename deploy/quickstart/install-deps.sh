#!/usr/bin/env bash
# Installs what FLEET needs to build and test on Debian 12, from Debian's archive only.
# Safe to run again: it installs only what is missing.
#   install-deps.sh           everything: building, and every test's real programs
#   install-deps.sh --build   only what building and `fleetd --demo` need (the demo command)
#   install-deps.sh --ha      what building and the replicated demo (ha-demo.sh) need: etcd too
#   install-deps.sh --python  what the Python client (build/clients/python) runs on, under
#                             Debian's /usr/bin/python3
set -euo pipefail

BUILD_PACKAGES=(
  cmake ninja-build ccache g++ pkg-config
  protobuf-compiler protobuf-compiler-grpc libprotobuf-dev libgrpc++-dev libabsl-dev
  libsqlite3-dev libyaml-cpp-dev prometheus-cpp-dev libcurl4-openssl-dev libssl-dev libcivetweb-dev
  nlohmann-json3-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  clang libclang-rt-14-dev
)
# The Python client: gRPC and protobuf, and YAML for fleetctl's config file (the build makes
# its stubs with the C++ build's protoc).
PYTHON_PACKAGES=(python3-grpcio python3-protobuf python3-yaml)
# Replicated fleetd (docs/ha.md): etcd 3.4 members, and etcdctl for operators.
ETCD_PACKAGES=(etcd-server etcd-client)
TEST_PACKAGES=(
  # The deploy/ checks: promtool, systemd-analyze (and python3-yaml, above, for
  # tests/deploy/check_deploy.py).
  prometheus systemd
  # The Python client, and grpc_tools for its stubs when pip builds it (tests/python/package_test).
  "${PYTHON_PACKAGES[@]}" python3-grpc-tools
  python3-torch python3-setuptools python3-venv python3-pip  # ring_allreduce.py; pip install
  # fleetctl's zsh completion is checked with zsh itself.
  zsh
  # deploy/slurm: the SPANK plugin's header, and the daemons tests/slurm runs jobs on.
  slurmctld slurmd slurm-client libslurm-dev munge
  # fleetctl -o dot pictures, rendered by tests/integration/ranks_pictures_test and docs/pictures.
  graphviz
  # The README's tour (tests/readme, readme.tour) talks to the emulated switch with plain
  # tools: TL1 with nc, REST and /metrics with curl.
  netcat-openbsd curl
  # tests/qemu: the pcie-sysfs backend on a real Linux kernel in a QEMU q35 guest, booted from
  # Debian's kernel with a busybox initramfs made at test time (kmod lists its modules).
  qemu-system-x86 linux-image-amd64 busybox-static kmod
  # tests/etcd: real etcd 3.4 members, and etcdctl for operators. Where systemd runs, Debian's
  # package enables its own etcd on 2379/2380; tests never touch it (they start their own
  # members on ports chosen at run time).
  "${ETCD_PACKAGES[@]}"
)

case "${1:-}" in
  --build) PACKAGES=("${BUILD_PACKAGES[@]}") ;;
  --ha) PACKAGES=("${BUILD_PACKAGES[@]}" "${ETCD_PACKAGES[@]}") ;;
  --python) PACKAGES=("${PYTHON_PACKAGES[@]}") ;;
  "") PACKAGES=("${BUILD_PACKAGES[@]}" "${TEST_PACKAGES[@]}") ;;
  *) echo "install-deps: unknown argument '$1'; use --build, --ha, --python or nothing" >&2; exit 2 ;;
esac

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "install-deps: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
