// FieldAllocator: header fields reuse the blocks of fields freed before on
// the same thread, the free lists stay bounded, and Beast's fields work on it.
#include "gateway/io/field_pool.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "gateway/io/io_types.h"

namespace tollgate::gateway {
namespace {

TEST(FieldPool, AFreedBlockServesTheNextAllocationOfItsSizeClass) {
  void* first = field_pool::Allocate(100);
  const std::size_t free_before = field_pool::FreeBlocks();
  field_pool::Deallocate(first, 100);
  EXPECT_EQ(field_pool::FreeBlocks(), free_before + 1);
  // 65..128 bytes share a class: the block comes back for 70 bytes too.
  void* second = field_pool::Allocate(70);
  EXPECT_EQ(second, first);
  EXPECT_EQ(field_pool::FreeBlocks(), free_before);
  field_pool::Deallocate(second, 70);
}

TEST(FieldPool, LargeBlocksAreNotKept) {
  const std::size_t free_before = field_pool::FreeBlocks();
  void* big = field_pool::Allocate(field_pool::kLargestPooled + 1);
  field_pool::Deallocate(big, field_pool::kLargestPooled + 1);
  EXPECT_EQ(field_pool::FreeBlocks(), free_before);
}

TEST(FieldPool, EachSizeClassKeepsABoundedNumberOfFreeBlocks) {
  std::vector<void*> blocks;
  for (std::size_t i = 0; i < field_pool::kMaxFreePerClass + 100; ++i) {
    blocks.push_back(field_pool::Allocate(field_pool::kLargestPooled));
  }
  const std::size_t free_before = field_pool::FreeBlocks();
  for (void* b : blocks) field_pool::Deallocate(b, field_pool::kLargestPooled);
  EXPECT_LE(field_pool::FreeBlocks(), free_before + field_pool::kMaxFreePerClass);
  EXPECT_GE(field_pool::FreeBlocks(), field_pool::kMaxFreePerClass);
}

TEST(FieldPool, ABlockFreedOnAnotherThreadJoinsThatThreadsLists) {
  void* block = field_pool::Allocate(40);
  std::size_t other_thread_free = 0;
  std::thread([&] {
    field_pool::Deallocate(block, 40);
    other_thread_free = field_pool::FreeBlocks();
  }).join();
  EXPECT_EQ(other_thread_free, 1U);
}

TEST(FieldPool, BeastFieldsWorkOnIt) {
  Fields fields;
  fields.set(http::field::host, "api.example.com");
  fields.insert("X-Tenant", "a");
  fields.insert("X-Long", std::string(2000, 'v'));  // beyond the pooled sizes
  fields.erase("X-Tenant");
  Fields copy = fields;
  EXPECT_EQ(copy[http::field::host], "api.example.com");
  EXPECT_EQ(copy["X-Long"].size(), 2000U);
  EXPECT_EQ(copy.count("X-Tenant"), 0U);

  RequestParser<http::empty_body> parser;
  boost::system::error_code ec;
  const std::string wire = "GET /a?b HTTP/1.1\r\nHost: h\r\nX-Api-Key: k\r\n\r\n";
  parser.put(asio::buffer(wire), ec);
  ASSERT_FALSE(ec);
  EXPECT_EQ(parser.get().target(), "/a?b");
  EXPECT_EQ(parser.get()["X-Api-Key"], "k");
}

}  // namespace
}  // namespace tollgate::gateway
