#include "gateway/admin/admin_blocks.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <algorithm>
#include <cctype>

#include "rules/duration.h"

namespace tollgate::gateway {
namespace {

namespace json = boost::json;

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// How a block is read: from an API call (a ttl) or as stored in Redis (its
// end).
enum class Source : std::uint8_t { kApi, kStored };

std::optional<rules::Block> FromJson(const json::object& doc, Source source,
                                     std::int64_t now_unix_ms, std::string& field,
                                     std::string& message) {
  auto bad = [&](std::string_view f, std::string m) -> std::optional<rules::Block> {
    field = f;
    message = std::move(m);
    return std::nullopt;
  };
  rules::Block block;
  int kinds = 0;
  bool ended = false;
  for (const auto& [key, value] : doc) {
    if (key == "ip") {
      ++kinds;
      block.kind = rules::BlockKind::kIp;
      std::string problem = "must be an IP address or network such as \"203.0.113.0/24\"";
      const std::optional<rules::Cidr> cidr =
          value.is_string() ? rules::Cidr::Parse(value.as_string(), problem) : std::nullopt;
      if (!cidr) return bad("ip", std::move(problem));
      block.network = *cidr;
    } else if (key == "user") {
      ++kinds;
      block.kind = rules::BlockKind::kUser;
      if (!value.is_string() || value.as_string().empty()) {
        return bad("user", "must be a non-empty string");
      }
      block.value = value.as_string();
    } else if (key == "header") {
      ++kinds;
      block.kind = rules::BlockKind::kHeader;
      if (!value.is_object() || value.as_object().size() != 1 ||
          !value.as_object().begin()->value().is_string() ||
          value.as_object().begin()->value().as_string().empty() ||
          value.as_object().begin()->key().empty()) {
        return bad("header", "must be one field and its value: {\"X-Api-Key\": \"...\"}");
      }
      if (!rules::IsHeaderName(value.as_object().begin()->key())) {
        return bad("header", "the field's name must be " + std::string(rules::kHeaderNameRule));
      }
      block.header = Lower(value.as_object().begin()->key());
      block.value = value.as_object().begin()->value().as_string();
    } else if (key == "ttl" && source == Source::kApi) {
      std::string problem = rules::DescribeDurationProblem(rules::DurationProblem::kSyntax);
      const std::optional<std::int64_t> ttl =
          value.is_string() ? rules::ReadPositiveDurationMs(value.as_string(), problem)
                            : std::nullopt;
      if (!ttl) return bad("ttl", std::move(problem));
      block.expires_unix_ms = now_unix_ms + *ttl;
      ended = true;
    } else if (key == "expires_unix_ms" && source == Source::kStored && value.is_int64()) {
      block.expires_unix_ms = value.as_int64();
      ended = true;
    } else if (key == "status") {
      if (!value.is_int64() || value.as_int64() < 400 || value.as_int64() > 599) {
        return bad("status", "must be an integer from 400 to 599");
      }
      block.status = static_cast<unsigned>(value.as_int64());
    } else if (source == Source::kApi) {
      return bad(key, "unknown field; a block has ip, user or header, ttl and status");
    }
  }
  if (kinds != 1) return bad("ip", "give exactly one of \"ip\", \"user\" and \"header\"");
  if (!ended) return bad("ttl", "missing: how long the block lasts, e.g. \"1h\"");
  return block;
}

// The JSON a block is stored with in the shared hash.
json::object StoredDoc(const rules::Block& block) {
  json::object doc = AdminBlocks::Describe(block, block.expires_unix_ms);
  doc.erase("ttl_ms");
  doc.erase("id");
  return doc;
}

}  // namespace

AdminBlocks::AdminBlocks(BlockTable& table, const store::Clock& clock, store::RedisStore* redis)
    : table_(table), clock_(clock) {
  if (redis != nullptr) shared_.emplace(*redis, "blocks");
}

std::optional<std::vector<rules::Block>> AdminBlocks::Parse(std::string_view body,
                                                            std::int64_t now_unix_ms, bool& many,
                                                            std::string& field,
                                                            std::string& message) {
  boost::system::error_code ec;
  const json::value doc = json::parse(body, ec);
  many = !ec && doc.is_array();
  if (ec || !(doc.is_object() || many)) {
    field = "body";
    message = "must be a JSON object (a block) or an array of blocks";
    return std::nullopt;
  }
  if (!many) {
    std::optional<rules::Block> block =
        FromJson(doc.as_object(), Source::kApi, now_unix_ms, field, message);
    if (!block) return std::nullopt;
    return std::vector<rules::Block>{std::move(*block)};
  }
  const json::array& list = doc.as_array();
  if (list.empty()) {
    field = "body";
    message = "an array of blocks holds at least one";
    return std::nullopt;
  }
  std::vector<rules::Block> blocks;
  blocks.reserve(list.size());
  for (std::size_t i = 0; i < list.size(); ++i) {
    std::optional<rules::Block> block =
        list[i].is_object()
            ? FromJson(list[i].as_object(), Source::kApi, now_unix_ms, field, message)
            : std::nullopt;
    if (!block) {
      if (!list[i].is_object()) message = "must be a JSON object (a block)";
      field = fmt::format("[{}]{}{}", i, list[i].is_object() ? "." : "", field);
      return std::nullopt;
    }
    blocks.push_back(std::move(*block));
  }
  return blocks;
}

json::object AdminBlocks::Describe(const rules::Block& block, std::int64_t now_unix_ms) {
  json::object out;
  out["id"] = block.Id();
  switch (block.kind) {
    case rules::BlockKind::kIp: {
      const std::string id = block.Id();
      out["ip"] = id.substr(3);
      break;
    }
    case rules::BlockKind::kUser:
      out["user"] = block.value;
      break;
    case rules::BlockKind::kHeader:
      out["header"] = json::object{{block.header, block.value}};
      break;
  }
  out["status"] = block.status;
  out["expires_unix_ms"] = block.expires_unix_ms;
  out["ttl_ms"] = std::max<std::int64_t>(0, block.expires_unix_ms - now_unix_ms);
  return out;
}

std::vector<rules::Block> AdminBlocks::Current() const {
  const std::int64_t now = clock_.UnixMs();
  std::vector<rules::Block> out;
  for (const rules::Block& b : blocks_) {
    if (b.expires_unix_ms > now) out.push_back(b);
  }
  return out;
}

std::optional<rules::Block> AdminBlocks::Matching(const rules::Identity& identity,
                                                  const rules::HeaderLookup& headers) const {
  const rules::BlockList* list = table_.Current();
  if (list == nullptr) return std::nullopt;
  const rules::Block* block = list->Match(identity, headers, clock_.UnixMs());
  if (block == nullptr) return std::nullopt;
  return *block;
}

void AdminBlocks::Apply(std::vector<rules::Block> blocks) {
  auto list = std::make_shared<const rules::BlockList>(std::move(blocks));
  blocks_ = list->blocks();  // one per id
  table_.Set(std::move(list));
}

Task<bool> AdminBlocks::Put(std::vector<rules::Block> blocks) {
  if (shared_) {
    std::vector<std::string> id_and_stored;
    id_and_stored.reserve(2 * blocks.size());
    for (const rules::Block& block : blocks) {
      id_and_stored.push_back(block.Id());
      id_and_stored.push_back(AdminHash::Stored(block.expires_unix_ms, StoredDoc(block)));
    }
    const AdminHash::Write write = co_await shared_->Put(std::move(id_and_stored));
    if (write == AdminHash::Write::kFailed) co_return false;
    if (write == AdminHash::Write::kMoved) {
      co_await Refresh();
      co_return true;
    }
  }
  // Applied here at once; the other gateways see the version move.
  std::vector<rules::Block> next = Current();
  for (rules::Block& block : blocks) next.push_back(std::move(block));
  Apply(std::move(next));
  co_return true;
}

Task<std::optional<bool>> AdminBlocks::Remove(std::string id) {
  if (!shared_) {
    std::vector<rules::Block> next = Current();
    const auto before = next.size();
    std::erase_if(next, [&](const rules::Block& b) { return b.Id() == id; });
    const bool removed = next.size() != before;
    Apply(std::move(next));
    co_return removed;
  }
  const std::optional<bool> removed = co_await shared_->Remove(std::move(id));
  if (removed) co_await Refresh();
  co_return removed;
}

Task<bool> AdminBlocks::Refresh() {
  const std::int64_t now = clock_.UnixMs();
  const bool over = std::any_of(blocks_.begin(), blocks_.end(),
                                [&](const rules::Block& b) { return b.expires_unix_ms <= now; });
  std::vector<AdminHash::Entry> entries;
  const AdminHash::Read read = co_await shared_->ReadIfChanged(over ? now : 0, entries);
  if (read != AdminHash::Read::kChanged) co_return read == AdminHash::Read::kUnchanged;
  std::vector<rules::Block> blocks;
  for (const AdminHash::Entry& entry : entries) {
    std::string field, message;
    std::optional<rules::Block> block =
        entry.doc.is_object()
            ? FromJson(entry.doc.as_object(), Source::kStored, now, field, message)
            : std::nullopt;
    if (!block) {
      spdlog::warn("admin: a stored block is not readable, left out: {}", entry.stored);
      continue;
    }
    if (block->expires_unix_ms > now) blocks.push_back(std::move(*block));
  }
  Apply(std::move(blocks));
  co_return true;
}

void AdminBlocks::Start(asio::io_context& io) {
  if (!shared_) return;
  timer_.emplace(io.get_executor());
  asio::co_spawn(io, RefreshLoop(), asio::detached);
}

void AdminBlocks::Stop() {
  stopped_ = true;
  if (timer_) timer_->cancel();
}

Task<void> AdminBlocks::RefreshLoop() {
  while (!stopped_) {
    co_await Refresh();
    timer_->expires_after(kRefreshInterval);
    co_await timer_->async_wait(kUseTuple);
  }
}

}  // namespace tollgate::gateway
