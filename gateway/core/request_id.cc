#include "gateway/core/request_id.h"

#include <sys/random.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <thread>

namespace tollgate::gateway {
namespace {

// A thread's source of IDs: a random prefix and key, drawn from the OS
// once, and a counter. An ID is the prefix and a bijective mix of the key
// and the counter, so that it is unique within the thread for 2^64 IDs and
// two threads or runs repeat one only if their 64-bit prefixes are equal.
// The mix makes consecutive IDs look unrelated (nobody guesses the next
// one from the last); it is no secret.
struct IdSource {
  std::uint64_t prefix = 0;
  std::uint64_t key = 0;
  std::uint64_t counter = 0;

  IdSource() {
    std::uint64_t seed[2] = {};
    if (getrandom(seed, sizeof seed, 0) != static_cast<ssize_t>(sizeof seed)) {
      // No entropy from the kernel (not expected): the time and thread
      // still tell threads and runs apart.
      seed[0] = static_cast<std::uint64_t>(
          std::chrono::system_clock::now().time_since_epoch().count());
      seed[1] = std::hash<std::thread::id>()(std::this_thread::get_id());
    }
    prefix = seed[0];
    key = seed[1];
  }
};

// splitmix64's finalizer: a bijection on 64-bit values.
std::uint64_t Mix(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

void PutHex(std::uint64_t value, char* out) {
  constexpr char kDigits[] = "0123456789abcdef";
  for (int i = 15; i >= 0; --i) {
    out[i] = kDigits[value & 0xf];
    value >>= 4;
  }
}

}  // namespace

bool ValidRequestId(std::string_view id) {
  return !id.empty() && id.size() <= kMaxRequestIdBytes &&
         std::all_of(id.begin(), id.end(), [](char c) { return c > 0x20 && c < 0x7f; });
}

void AppendNewRequestId(std::string& out) {
  thread_local IdSource source;
  const std::size_t at = out.size();
  out.resize(at + kNewRequestIdBytes);
  PutHex(source.prefix, out.data() + at);
  PutHex(Mix(source.key + source.counter++), out.data() + at + 16);
}

std::string_view EnsureRequestId(std::string& id) {
  if (id.empty()) AppendNewRequestId(id);
  return id;
}

void AppendRequestIdLine(std::string_view id, std::string& out) {
  if (id.empty()) return;
  out += kRequestIdField;
  out += ": ";
  out += id;
  out += "\r\n";
}

}  // namespace tollgate::gateway
