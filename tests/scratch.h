#ifndef FLEET_TESTS_SCRATCH_H_
#define FLEET_TESTS_SCRATCH_H_

#include <string>

namespace fleet::testing {

// A fresh, empty directory under GoogleTest's TempDir() for the running test, named by the
// process, the test and `name` (emptied if it existed). Tests leave nothing behind: the
// directory is removed when its test ends, if the test passed; one made outside a test (in a
// suite's setup, or by a benchmark) is removed when the program ends, if every test passed.
// A failed test's directories are kept, and their paths printed, for the post-mortem. Real
// daemons write their state, logs and (etcd) preallocated logs of 64 MiB here, so an unremoved
// run adds up to gigabytes. Safe from any thread.
std::string FreshDirectory(const std::string& name);

}  // namespace fleet::testing

#endif  // FLEET_TESTS_SCRATCH_H_
