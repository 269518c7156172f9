// Blocks set at run time through the admin API: requests from an IP
// network, from a user, or carrying a header value are refused before any
// rule. A BlockList is an immutable snapshot of them: addresses are looked
// up in binary tries over the address bits, so a lookup costs at most 128
// steps (32 for an IPv4 client) whatever the number of blocks; users and header
// values in hash tables. IPv4 networks have a trie of their own over the
// 32 IPv4 bits, so that an IPv4 client is not walked down the 96 bits every
// IPv4-mapped address shares. Immutable once built; thread-safe.
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
  // A trie of networks: nodes_[0] is the root (the empty prefix).
  struct Trie {
    Trie() { nodes.emplace_back(); }
    std::vector<Node> nodes;
    // Bits [first_bit, first_bit + bits) of `address`' 128-bit form.
    void Insert(const IpAddress& address, int first_bit, int bits, std::int32_t block);
    // The first block of `list` on the path of `address` (bits from
    // first_bit on), the shortest prefix first, not over at now_unix_ms.
    const Block* Find(const IpAddress& address, int first_bit, const BlockList& list,
                      std::int64_t now_unix_ms) const;
  };
  const Block* Live(std::int32_t index, std::int64_t now_unix_ms) const;

  std::vector<Block> blocks_;
  Trie v4_;  // IPv4 networks, over the 32 IPv4 bits
  Trie v6_;  // every other network, over all 128 bits
  std::unordered_map<std::string, std::int32_t> users_;
  std::vector<std::string> header_names_;                   // distinct, lower case
  std::unordered_map<std::string, std::int32_t> headers_;  // "name\x1fvalue"
};

// The key of a header block in BlockList's table.
std::string HeaderBlockKey(std::string_view lower_name, std::string_view value);

}  // namespace tollgate::rules
