// Loopback ports for tests.
#pragma once

#include <cstdint>

namespace tollgate::testing {

// A port of 127.0.0.1 that nothing listens on: the kernel just gave it out
// and it was closed (a test's peer may bind it, or a client find it dead).
std::uint16_t UnusedPort();

}  // namespace tollgate::testing
