// Blocks set at run time through the admin API: requests from an IP
// network, from a user, or carrying a header value are refused before any
// rule. A BlockList is an immutable snapshot of them: addresses are looked
// up in a binary trie over the 128-bit form (IPv4 mapped), so a lookup
// costs at most 128 steps whatever the number of blocks; users and header
// values in hash tables. Immutable once built; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "rules/identity.h"
#include "rules/ip.h"
#include "rules/request_facts.h"

namespace tollgate::rules {

enum class BlockKind : std::uint8_t { kIp, kUser, kHeader };

struct Block {
  BlockKind kind = BlockKind::kIp;
  Cidr network;        // kIp
  std::string header;  // kHeader: the field's name, lower case
  std::string value;   // kUser: the user; kHeader: the field's exact value
  unsigned status = 403;
  std::int64_t expires_unix_ms = 0;  // the block ends then (wall clock, ms)

  // What the block matches, as the API names it: "ip:203.0.113.0/24",
  // "user:mallory", "header:x-api-key:<value>". Unique in a list.
  std::string Id() const;
};

class BlockList {
 public:
  // Later blocks with the same Id() replace earlier ones.
  explicit BlockList(std::vector<Block> blocks);

  // A block of the request, not over at now_unix_ms, or null. An
  // unidentified client (no address) matches no IP block.
  const Block* Match(const Identity& identity, const HeaderLookup& headers,
                     std::int64_t now_unix_ms) const;
  const std::vector<Block>& blocks() const { return blocks_; }
  bool empty() const { return blocks_.empty(); }

 private:
  struct Node {
    std::int32_t child[2] = {-1, -1};
    std::int32_t block = -1;  // a block of exactly this network
  };
  void Insert(std::size_t index);
  const Block* Live(std::int32_t index, std::int64_t now_unix_ms) const;

  std::vector<Block> blocks_;
  std::vector<Node> trie_;  // trie_[0] is the root (the /0 network)
  std::unordered_map<std::string, std::int32_t> users_;
  std::vector<std::string> header_names_;                   // distinct, lower case
  std::unordered_map<std::string, std::int32_t> headers_;  // "name\x1fvalue"
};

// The key of a header block in BlockList's table.
std::string HeaderBlockKey(std::string_view lower_name, std::string_view value);

}  // namespace tollgate::rules
