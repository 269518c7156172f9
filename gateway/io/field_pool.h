// FieldAllocator: the allocator of the HTTP header fields on the request
// path (Beast's basic_fields allocates one block per field, plus the target
// and reason strings).
//
// Why not malloc: with dozens of requests in flight on one thread, the fields
// of all of them are alive at once; glibc's per-thread cache keeps only 7
// blocks per size, so most fields went through malloc's shared bins (and
// large allocations then consolidated them). Here blocks of up to
// kLargestPooled bytes come from per-thread free lists, in 64-byte size
// classes, each keeping at most kMaxFreePerClass blocks (the rest go back to
// the heap); larger blocks come from operator new.
//
// Stateless: every instance is interchangeable. Thread-safe: each thread has
// its own lists; a block may be freed on another thread than the one that
// allocated it (it then joins that thread's list).
#pragma once

#include <cstddef>

namespace tollgate::gateway {

namespace field_pool {

inline constexpr std::size_t kClassBytes = 64;
inline constexpr std::size_t kLargestPooled = 512;
inline constexpr std::size_t kMaxFreePerClass = 4096;

void* Allocate(std::size_t bytes);
void Deallocate(void* block, std::size_t bytes) noexcept;
// Blocks in the calling thread's free lists (tests).
std::size_t FreeBlocks();

}  // namespace field_pool

template <typename T>
class FieldAllocator {
 public:
  using value_type = T;

  FieldAllocator() noexcept = default;
  template <typename U>
  FieldAllocator(const FieldAllocator<U>&) noexcept {}  // NOLINT: implicit like std::allocator

  T* allocate(std::size_t n) { return static_cast<T*>(field_pool::Allocate(n * sizeof(T))); }
  void deallocate(T* block, std::size_t n) noexcept {
    field_pool::Deallocate(block, n * sizeof(T));
  }

  template <typename U>
  friend bool operator==(const FieldAllocator&, const FieldAllocator<U>&) noexcept {
    return true;
  }
};

}  // namespace tollgate::gateway
