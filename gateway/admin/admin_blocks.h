// The blocks of the admin API (PUT, GET and DELETE /api/v1/blocks): read
// from JSON, kept in the configured store and applied through the
// BlockTable that admit reads. With the local store they live in this
// process; with Redis in a hash shared by every gateway on it (see
// store/lua/admin/blocks_*.lua), which each gateway reads again whenever
// its version moves, checked every kRefreshInterval: a block set on one
// gateway applies on all of them within a second. Admin thread only.
#pragma once

#include <boost/json/array.hpp>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gateway/core/block_table.h"
#include "gateway/admin/admin_hash.h"
#include "gateway/io/net.h"
#include "base/clock.h"

namespace tollgate::gateway {

class AdminBlocks {
 public:
  static constexpr std::chrono::milliseconds kRefreshInterval{500};

  // `table`, `clock` and `redis` (null with the local store) must outlive it.
  AdminBlocks(BlockTable& table, const store::Clock& clock, store::RedisStore* redis);

  // The blocks of a PUT body: one block, a JSON object with exactly one of
  // "ip" (an address or CIDR), "user" and "header" ({"Name": "value"}),
  // "ttl" (a duration), and "status" (400-599, default 403); or an array
  // of one or more of them (`many` tells which; the admin API's body limit
  // bounds it). nullopt with `field` ("ttl", or "[3].ttl" in an array) and
  // `message` saying what is wrong: then none of them is set.
  static std::optional<std::vector<rules::Block>> Parse(std::string_view body,
                                                        std::int64_t now_unix_ms, bool& many,
                                                        std::string& field, std::string& message);
  // A block as the API shows it: id, what it matches, status, expires_unix_ms
  // and ttl_ms (what is left of it at now_unix_ms).
  static boost::json::object Describe(const rules::Block& block, std::int64_t now_unix_ms);

  // Adds `blocks` (each replacing the one with its id; a later one of the
  // same id wins), all in one change. False when the store did not answer:
  // nothing changed.
  Task<bool> Put(std::vector<rules::Block> blocks);
  // Removes the block with this id: whether there was one; nullopt when the
  // store did not answer.
  Task<std::optional<bool>> Remove(std::string id);
  // The blocks in force (not over), in the order they were set.
  std::vector<rules::Block> Current() const;
  // The block in force that applies to a client, if any (as admit checks).
  std::optional<rules::Block> Matching(const rules::Identity& identity,
                                       const rules::HeaderLookup& headers) const;

  // Redis: refreshes every kRefreshInterval until Stop().
  void Start(asio::io_context& io);
  void Stop();

 private:
  // Redis: reads the blocks again if their version moved.
  Task<bool> Refresh();
  Task<void> RefreshLoop();
  void Apply(std::vector<rules::Block> blocks);

  BlockTable& table_;
  const store::Clock& clock_;
  std::optional<AdminHash> shared_;  // Redis
  std::vector<rules::Block> blocks_;    // as applied
  std::optional<Timer> timer_;
  bool stopped_ = false;
};

}  // namespace tollgate::gateway
