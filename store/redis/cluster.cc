// Redis Cluster: the slot of a key, the slot map, and following MOVED, ASK
// and TRYAGAIN (hiredis 0.14 has no cluster support).
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <charconv>
#include <chrono>

#include "store/redis/connection.h"
#include "store/redis/sync_connection.h"
#include "store/redis_store.h"

namespace tollgate::store {
using namespace redis;

std::uint16_t RedisSlot(std::string_view key) {
  // CRC16-CCITT (XMODEM), as Redis Cluster computes it, over the hash tag:
  // the bytes between the first '{' and the next '}' when not empty.
  const std::size_t open = key.find('{');
  if (open != std::string_view::npos) {
    const std::size_t close = key.find('}', open + 1);
    if (close != std::string_view::npos && close > open + 1) {
      key = key.substr(open + 1, close - open - 1);
    }
  }
  std::uint16_t crc = 0;
  for (char ch : key) {
    crc ^= static_cast<std::uint16_t>(static_cast<unsigned char>(ch) << 8);
    for (int bit = 0; bit < 8; ++bit) {
      crc = static_cast<std::uint16_t>((crc & 0x8000) ? (crc << 1) ^ 0x1021 : crc << 1);
    }
  }
  return static_cast<std::uint16_t>(crc % kRedisSlots);
}

std::optional<RedisSlotMap> FetchClusterSlots(const RedisOptions& options, std::string& error) {
  for (const RedisAddress& seed : options.nodes) {
    SyncConnection c(seed, options.connect_timeout_ms);
    if (!c.Connected()) {
      error = c.ConnectError();
      continue;
    }
    bool setup_failed = false;
    for (const Command& handshake : HandshakeCommands(seed)) {
      std::string text;
      c.Run(handshake, text);
      if (!text.empty()) {
        error = fmt::format("redis {}:{}: {}", seed.host, seed.port, text);
        setup_failed = true;
      }
    }
    if (setup_failed) continue;
    std::string text;
    auto reply = c.Run({"CLUSTER", "SLOTS"}, text);
    if (!text.empty() || reply->type != REDIS_REPLY_ARRAY) {
      error = fmt::format("redis {}:{}: CLUSTER SLOTS failed: {}", seed.host, seed.port, text);
      continue;
    }
    RedisSlotMap map;
    for (std::size_t i = 0; i < reply->elements; ++i) {
      const redisReply& range = *reply->element[i];
      if (range.type != REDIS_REPLY_ARRAY || range.elements < 3) continue;
      const redisReply& master = *range.element[2];
      if (master.type != REDIS_REPLY_ARRAY || master.elements < 2) continue;
      RedisAddress node = seed;
      if (master.element[0]->type == REDIS_REPLY_STRING && master.element[0]->len > 0) {
        node.host.assign(master.element[0]->str, master.element[0]->len);
      }
      node.port = static_cast<std::uint16_t>(master.element[1]->integer);
      map.push_back({range.element[0]->integer, range.element[1]->integer, node});
    }
    return map;
  }
  return std::nullopt;
}

void RedisStore::LoadSlotMap() {
  const RedisOptions& options = shared_->options;
  slots_.assign(kRedisSlots, 0);
  std::string error;
  if (std::optional<RedisSlotMap> map = FetchClusterSlots(options, error)) {
    for (const RedisSlotRange& range : *map) {
      const int node = NodeIndex(range.node);
      for (std::int64_t slot = range.first; slot <= range.last && slot < kRedisSlots; ++slot) {
        slots_[static_cast<std::size_t>(slot)] = node;
      }
    }
  } else {
    spdlog::warn("redis cluster: no slot map yet ({}); redirects will teach it", error);
    NodeIndex(options.nodes[0]);
  }
}

int RedisStore::NodeIndex(const RedisAddress& address) {
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    if (nodes_[i].address.host == address.host && nodes_[i].address.port == address.port) {
      return static_cast<int>(i);
    }
  }
  Node& node = nodes_.emplace_back();
  node.address = address;
  if (!shared_->options.nodes.empty()) {
    // Credentials and database come from the first seed.
    const RedisAddress& seed = shared_->options.nodes[0];
    node.address.user = seed.user;
    node.address.password = seed.password;
  }
  for (std::size_t i = 0; i < std::max<std::size_t>(1, shared_->options.pool); ++i) {
    node.connections.push_back(std::make_unique<Connection>(*shared_, *this, node.address));
  }
  return static_cast<int>(nodes_.size() - 1);
}

void RedisStore::Redirect(Pending p, std::string_view error) {
  if (p.done) return;
  shared_->health.redirects.fetch_add(1, std::memory_order_relaxed);
  if (error.starts_with("TRYAGAIN")) {
    // A multi-key script during a slot migration: its keys are split
    // between the two nodes for a moment. Sent again shortly, routed anew.
    RetryLater(std::move(p));
    return;
  }
  // "MOVED <slot> <host>:<port>" or "ASK <slot> <host>:<port>".
  const bool ask = error.starts_with("ASK ");
  std::string_view rest = error.substr(ask ? 4 : 6);
  const std::size_t space = rest.find(' ');
  const std::size_t colon = rest.rfind(':');
  std::int64_t slot = -1;
  unsigned port = 0;
  if (space == std::string_view::npos || colon == std::string_view::npos || colon < space ||
      std::from_chars(rest.data(), rest.data() + space, slot).ec != std::errc() ||
      std::from_chars(rest.data() + colon + 1, rest.data() + rest.size(), port).ec != std::errc() ||
      slot < 0 || slot >= kRedisSlots || port == 0 || port > 65535) {
    p.Fail(StoreStatus::kError, shared_->health);
    return;
  }
  RedisAddress target;
  target.host = std::string(rest.substr(space + 1, colon - space - 1));
  target.port = static_cast<std::uint16_t>(port);
  const int node = NodeIndex(target);
  if (!ask) {
    if (!slots_.empty()) slots_[static_cast<std::size_t>(slot)] = node;
    p.moved_to = node;
    if (++p.moved > 1) {
      // Sent back by the node it was sent to: the masters disagree about
      // the slot, as between the two ends' CLUSTER SETSLOT NODE of a
      // migration. Going back and forth at once would only spin until they
      // agree.
      RetryLater(std::move(p));
      return;
    }
  }
  if (Connection* c = PickOnNode(NowMs(), static_cast<std::size_t>(node))) {
    c->Resend(std::move(p), ask);
  } else {
    p.Fail(StoreStatus::kUnavailable, shared_->health);
  }
}

void RedisStore::RetryLater(Pending p) {
  shared_->retry.push_back(std::move(p));
  if (shared_->retry.size() == 1) {
    shared_->retry_timer.expires_after(std::chrono::milliseconds(kRetryAfterMs));
    shared_->retry_timer.async_wait([this](boost::system::error_code ec) {
      if (!ec) RetryNow();
    });
  }
}

void RedisStore::RetryNow() {
  std::deque<Pending> ready;
  ready.swap(shared_->retry);
  const std::int64_t now = NowMs();
  for (Pending& p : ready) {
    if (now >= p.deadline) {
      shared_->health.timeouts.fetch_add(1, std::memory_order_relaxed);
      p.Fail(StoreStatus::kTimeout, shared_->health);
      continue;
    }
    const std::size_t node = slots_.empty() && p.moved_to >= 0
                                 ? static_cast<std::size_t>(p.moved_to)
                                 : NodeOfSlot(p.slot);
    if (Connection* c = PickOnNode(now, node)) {
      c->Resend(std::move(p), false);
    } else {
      p.Fail(StoreStatus::kUnavailable, shared_->health);
    }
  }
}

}  // namespace tollgate::store
