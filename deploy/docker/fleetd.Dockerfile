# fleetd, the FLEET controller, in a container. Build from the repository root:
#   docker build -f deploy/docker/fleetd.Dockerfile -t fleetd .
# Run it with this site's fleetd.yaml, inventory and switch credentials in /etc/fleet and its
# state in a volume (deploy/README.md):
#   docker run -d --name fleetd -p 50051:50051 -p 9464:9464 \
#     -v /srv/fleet/etc:/etc/fleet:ro -v fleet-state:/var/lib/fleet fleetd
# fleetd drains on SIGTERM within shutdown_grace_seconds (10 in the example config); stop it
# with `docker stop -t 30 fleetd` so the drain is not cut short by SIGKILL.

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
 && cmake --build /build --target fleetd \
 && strip /build/bin/fleetd

# Runtime stage: the shared libraries fleetd links against, nothing else.
FROM debian:12
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      ca-certificates \
      libgrpc++1.51 libgrpc29 libprotobuf32 libabsl20220623 libsqlite3-0 libyaml-cpp0.7 \
      libprometheus-cpp-core1.0 libprometheus-cpp-pull1.0 libcivetweb1 libcurl4 \
 && rm -rf /var/lib/apt/lists/*
# A fixed uid/gid, so that files mounted from the host (the switch credentials: mode 0600)
# can be given to it: chown 10001:10001 on the host.
RUN groupadd --system --gid 10001 fleet \
 && useradd --system --uid 10001 --gid fleet --home-dir /var/lib/fleet --no-create-home \
      --shell /usr/sbin/nologin fleet \
 && install -d -o fleet -g fleet -m 0750 /var/lib/fleet \
 && install -d -m 0755 /etc/fleet
COPY --from=build /build/bin/fleetd /usr/bin/fleetd
COPY deploy/config/fleetd.yaml /etc/fleet/fleetd.yaml
USER fleet:fleet
WORKDIR /var/lib/fleet
EXPOSE 50051 9464
VOLUME ["/var/lib/fleet"]
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/bin/fleetd"]
CMD ["--config", "/etc/fleet/fleetd.yaml"]
