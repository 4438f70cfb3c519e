// LeakSanitizer's suppressions, compiled into the executables of an ASan build only
// (FLEET_SANITIZE; CMakeLists.txt's FLEET_LSAN_SUPPRESSIONS).
//
// gRPC 1.51's TLS client with OpenSSL 3 sometimes leaves a connection's TLS state unfreed when
// the process exits, even after grpc_shutdown_blocking(). Seen in fleetctl (about 2 % of runs of
// one verb beside two busy CPUs), in a fleetd replica exiting to restart while its connections
// to two killed etcd members were mid-handshake (79 objects), and in the etcd client's test
// binary after it had killed two of three members (88 objects). Every leaked object was
// allocated by libcrypto, with no frame of ours, so a report at exit would fail a test for a
// leak our code does not make. The pattern hides every leak of libcrypto's memory, ours through
// common/pki included (libcrypto has no frame pointers, so the stack LeakSanitizer sees stops
// inside it): common_test, which holds pki's tests and makes no TLS connection to a peer that
// dies, is built without this file so that pki's leaks are still reported.

extern "C" const char* __lsan_default_suppressions() { return "leak:libcrypto.so\n"; }
