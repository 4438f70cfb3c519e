# fleet-onic-agent, the FLEET O-NIC agent, in a container. Build from the repository root:
#   docker build -f deploy/docker/fleet-onic-agent.Dockerfile -t fleet-onic-agent .
# The agent dials out to fleetd and needs no published port except its metrics (9465).
# With the pcie-sysfs backend (real hosts) it works the host's PCIe devices through a
# writable /sys and CAP_SYS_ADMIN, which Docker grants only to a privileged container:
#   docker run -d --name fleet-onic-agent --privileged -p 9465:9465 \
#     -v /srv/fleet/etc/fleet-onic-agent.yaml:/etc/fleet/fleet-onic-agent.yaml:ro \
#     fleet-onic-agent
# With the emulated backend (polatis-emu) it needs no privilege: drop --privileged.

# Build stage: Debian 12's packages, as in deploy/quickstart/install-deps.sh, without the
# test, benchmark and fuzzing ones.
FROM debian:12 AS build
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      cmake ninja-build g++ pkg-config \
      protobuf-compiler protobuf-compiler-grpc libprotobuf-dev libgrpc++-dev libabsl-dev \
      libsqlite3-dev libyaml-cpp-dev prometheus-cpp-dev libcurl4-openssl-dev libcivetweb-dev \
      nlohmann-json3-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cmake -S . -B /build -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DFLEET_BUILD_TESTS=OFF -DFLEET_BUILD_BENCHMARKS=OFF \
 && cmake --build /build --target fleet-onic-agent \
 && strip /build/bin/fleet-onic-agent

# Runtime stage: the shared libraries the agent links against, nothing else. It runs as
# root: the pcie-sysfs backend writes sysfs files only root may write (see
# deploy/systemd/fleet-onic-agent.service).
FROM debian:12
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      ca-certificates \
      libgrpc++1.51 libgrpc29 libprotobuf32 libabsl20220623 libyaml-cpp0.7 \
      libprometheus-cpp-core1.0 libprometheus-cpp-pull1.0 libcivetweb1 libcurl4 \
 && rm -rf /var/lib/apt/lists/* \
 && install -d -m 0755 /etc/fleet
COPY --from=build /build/bin/fleet-onic-agent /usr/bin/fleet-onic-agent
COPY deploy/config/fleet-onic-agent.yaml /etc/fleet/fleet-onic-agent.yaml
EXPOSE 9465
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/bin/fleet-onic-agent"]
CMD ["--config", "/etc/fleet/fleet-onic-agent.yaml"]
