#include "rules/block_list.h"

#include <algorithm>

namespace tollgate::rules {

std::string HeaderBlockKey(std::string_view lower_name, std::string_view value) {
  std::string key(lower_name);
  key.push_back('\x1f');
  key.append(value);
  return key;
}

std::string Block::Id() const {
  switch (kind) {
    case BlockKind::kIp: {
      const int family_bits = network.network.v4 ? network.prefix_length - 96 : network.prefix_length;
      return "ip:" + network.network.ToString() + "/" + std::to_string(family_bits);
    }
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
  trie_.emplace_back();
  for (std::size_t i = 0; i < blocks_.size(); ++i) {
    const Block& b = blocks_[i];
    const auto index = static_cast<std::int32_t>(i);
    switch (b.kind) {
      case BlockKind::kIp:
        Insert(i);
        break;
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

void BlockList::Insert(std::size_t index) {
  const Cidr& c = blocks_[index].network;
  std::size_t node = 0;
  for (int bit = 0; bit < c.prefix_length; ++bit) {
    const int b = (c.network.bytes[bit / 8] >> (7 - bit % 8)) & 1;
    if (trie_[node].child[b] < 0) {
      trie_[node].child[b] = static_cast<std::int32_t>(trie_.size());
      trie_.emplace_back();
    }
    node = static_cast<std::size_t>(trie_[node].child[b]);
  }
  trie_[node].block = static_cast<std::int32_t>(index);
}

const Block* BlockList::Live(std::int32_t index, std::int64_t now_unix_ms) const {
  if (index < 0) return nullptr;
  const Block& b = blocks_[static_cast<std::size_t>(index)];
  return b.expires_unix_ms > now_unix_ms ? &b : nullptr;
}

const Block* BlockList::Match(const Identity& identity, const HeaderLookup& headers,
                              std::int64_t now_unix_ms) const {
  if (identity.unidentified_client.empty() && trie_.size() > 1) {
    // Every network on the address's path through the trie contains it.
    std::size_t node = 0;
    for (int bit = 0;; ++bit) {
      if (const Block* b = Live(trie_[node].block, now_unix_ms)) return b;
      if (bit == 128) break;
      const int next = (identity.client_ip.bytes[bit / 8] >> (7 - bit % 8)) & 1;
      if (trie_[node].child[next] < 0) break;
      node = static_cast<std::size_t>(trie_[node].child[next]);
    }
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
