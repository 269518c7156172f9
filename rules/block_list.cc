#include "rules/block_list.h"

#include <algorithm>

namespace tollgate::rules {
namespace {

constexpr int kMappedBits = 96;  // ::ffff:0:0/96, where IPv4 addresses live

bool Mapped(const IpAddress& address) {
  for (int i = 0; i < 10; ++i) {
    if (address.bytes[static_cast<std::size_t>(i)] != 0) return false;
  }
  return address.bytes[10] == 0xff && address.bytes[11] == 0xff;
}

int Bit(const IpAddress& address, int bit) {
  return (address.bytes[static_cast<std::size_t>(bit / 8)] >> (7 - bit % 8)) & 1;
}

}  // namespace

std::string HeaderBlockKey(std::string_view lower_name, std::string_view value) {
  std::string key(lower_name);
  key.push_back('\x1f');
  key.append(value);
  return key;
}

std::string Block::Id() const {
  switch (kind) {
    case BlockKind::kIp:
      return "ip:" + network.ToString();
    case BlockKind::kUser:
      return "user:" + value;
    case BlockKind::kHeader:
      return "header:" + header + ":" + value;
  }
  return {};
}

BlockList::BlockList(std::vector<Block> blocks) {
  std::unordered_map<std::string, std::size_t> by_id;
  for (Block& b : blocks) {
    const std::string id = b.Id();
    auto [it, added] = by_id.emplace(id, blocks_.size());
    if (added) {
      blocks_.push_back(std::move(b));
    } else {
      blocks_[it->second] = std::move(b);
    }
  }
  for (std::size_t i = 0; i < blocks_.size(); ++i) {
    const Block& b = blocks_[i];
    const auto index = static_cast<std::int32_t>(i);
    switch (b.kind) {
      case BlockKind::kIp: {
        const Cidr& c = b.network;
        if (c.prefix_length >= kMappedBits && Mapped(c.network)) {
          v4_.Insert(c.network, kMappedBits, c.prefix_length - kMappedBits, index);
        } else {
          v6_.Insert(c.network, 0, c.prefix_length, index);
        }
        break;
      }
      case BlockKind::kUser:
        users_[b.value] = index;
        break;
      case BlockKind::kHeader:
        if (std::find(header_names_.begin(), header_names_.end(), b.header) ==
            header_names_.end()) {
          header_names_.push_back(b.header);
        }
        headers_[HeaderBlockKey(b.header, b.value)] = index;
        break;
    }
  }
}


void BlockList::Trie::Insert(const IpAddress& address, int first_bit, int bits,
                             std::int32_t block) {
  std::size_t node = 0;
  for (int bit = first_bit; bit < first_bit + bits; ++bit) {
    const int b = Bit(address, bit);
    if (nodes[node].child[b] < 0) {
      nodes[node].child[b] = static_cast<std::int32_t>(nodes.size());
      nodes.emplace_back();
    }
    node = static_cast<std::size_t>(nodes[node].child[b]);
  }
  nodes[node].block = block;
}

const Block* BlockList::Trie::Find(const IpAddress& address, int first_bit,
                                   const BlockList& list, std::int64_t now_unix_ms) const {
  if (nodes.size() == 1 && nodes[0].block < 0) return nullptr;
  // Every network on the address's path through the trie contains it.
  std::size_t node = 0;
  for (int bit = first_bit;; ++bit) {
    if (const Block* b = list.Live(nodes[node].block, now_unix_ms)) return b;
    if (bit == 128) return nullptr;
    const std::int32_t next = nodes[node].child[Bit(address, bit)];
    if (next < 0) return nullptr;
    node = static_cast<std::size_t>(next);
  }
}

const Block* BlockList::Live(std::int32_t index, std::int64_t now_unix_ms) const {
  if (index < 0) return nullptr;
  const Block& b = blocks_[static_cast<std::size_t>(index)];
  return b.expires_unix_ms > now_unix_ms ? &b : nullptr;
}

const Block* BlockList::Match(const Identity& identity, const HeaderLookup& headers,
                              std::int64_t now_unix_ms) const {
  if (identity.unidentified_client.empty()) {
    const IpAddress& ip = identity.client_ip;
    // An IPv4 client may also be in an IPv6 network that holds IPv4-mapped
    // addresses (::/0, ::ffff:0:0/96); such a walk ends within a few bits
    // for the usual IPv6 networks.
    if (Mapped(ip)) {
      if (const Block* b = v4_.Find(ip, kMappedBits, *this, now_unix_ms)) return b;
    }
    if (const Block* b = v6_.Find(ip, 0, *this, now_unix_ms)) return b;
  }
  if (!identity.user.empty() && !users_.empty()) {
    auto it = users_.find(identity.user);
    if (it != users_.end()) {
      if (const Block* b = Live(it->second, now_unix_ms)) return b;
    }
  }
  for (const std::string& name : header_names_) {
    const std::string_view value = headers.Get(name);
    if (value.empty()) continue;
    auto it = headers_.find(HeaderBlockKey(name, value));
    if (it != headers_.end()) {
      if (const Block* b = Live(it->second, now_unix_ms)) return b;
    }
  }
  return nullptr;
}

}  // namespace tollgate::rules
