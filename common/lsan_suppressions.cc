// LeakSanitizer's suppressions, linked into the executables of an ASan build only
// (FLEET_SANITIZE): every fleet_cc_binary and fleet_cc_test not marked LIBCRYPTO_LEAKS
// (CMakeLists.txt, fleet_lsan_suppressions).
//
// gRPC 1.51's TLS client with OpenSSL 3 sometimes leaves a connection's TLS state unfreed when
// the process exits, even after grpc_shutdown_blocking(). Seen in fleetctl (about 2 % of runs of
// one verb beside two busy CPUs), in a fleetd replica exiting to restart while its connections
// to two killed etcd members were mid-handshake (79 objects), and in the etcd client's test
// binary after it had killed two of three members (88 objects). Every leaked object was
// allocated by libcrypto, and the stacks LeakSanitizer records stop inside it (libcrypto has no
// frame pointers), so no narrower pattern can name gRPC as the caller. This one matches any
// stack with a libcrypto frame: it hides every leak of OpenSSL's memory, ours too. So the
// executables that call OpenSSL themselves and dial no gRPC over TLS are built without it
// (LIBCRYPTO_LEAKS): common_test (common/pki, common/sha256), polatis-emu (its HTTPS front)
// and the polatis adapter's test against it.

extern "C" const char* __lsan_default_suppressions() { return "leak:libcrypto.so\n"; }
