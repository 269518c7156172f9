#include "gateway/io/field_pool.h"

#include <new>

namespace tollgate::gateway::field_pool {
namespace {

constexpr std::size_t kClasses = kLargestPooled / kClassBytes;

struct FreeBlock {
  FreeBlock* next;
};

struct FreeLists {
  FreeBlock* head[kClasses] = {};
  std::size_t count[kClasses] = {};

  FreeLists() = default;
  FreeLists(const FreeLists&) = delete;
  FreeLists& operator=(const FreeLists&) = delete;
  ~FreeLists() {
    for (std::size_t c = 0; c < kClasses; ++c) {
      while (FreeBlock* b = head[c]) {
        head[c] = b->next;
        ::operator delete(b);
      }
    }
  }
};

thread_local FreeLists lists;

// Size class of a pooled block: 0 for 1..64 bytes, 1 for 65..128, ...
std::size_t ClassOf(std::size_t bytes) { return (bytes - 1) / kClassBytes; }

}  // namespace

void* Allocate(std::size_t bytes) {
  if (bytes == 0 || bytes > kLargestPooled) return ::operator new(bytes);
  const std::size_t c = ClassOf(bytes);
  FreeLists& l = lists;
  if (FreeBlock* b = l.head[c]) {
    l.head[c] = b->next;
    --l.count[c];
    return b;
  }
  // Every pooled block of a class has the class's full size, whoever frees it.
  return ::operator new((c + 1) * kClassBytes);
}

void Deallocate(void* block, std::size_t bytes) noexcept {
  if (block == nullptr) return;
  if (bytes == 0 || bytes > kLargestPooled) {
    ::operator delete(block);
    return;
  }
  const std::size_t c = ClassOf(bytes);
  FreeLists& l = lists;
  if (l.count[c] >= kMaxFreePerClass) {
    ::operator delete(block);
    return;
  }
  l.head[c] = new (block) FreeBlock{l.head[c]};
  ++l.count[c];
}

std::size_t FreeBlocks() {
  std::size_t n = 0;
  for (std::size_t c = 0; c < kClasses; ++c) n += lists.count[c];
  return n;
}

}  // namespace tollgate::gateway::field_pool
