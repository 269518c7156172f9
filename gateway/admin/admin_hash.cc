#include "gateway/admin/admin_hash.h"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <utility>

#include "gateway/admin/store_reply.h"
#include "store/redis_store.h"

namespace tollgate::gateway {

namespace json = boost::json;

AdminHash::AdminHash(store::RedisStore& redis, std::string_view name) : redis_(redis) {
  const std::string& prefix = redis_.options().prefix;
  hash_key_ = store::RedisTaggedKey(prefix, "admin", "", name);
  version_key_ = store::RedisTaggedKey(prefix, "admin", "", std::string(name) + "_version");
}

std::string AdminHash::Stored(std::int64_t expires_unix_ms, const json::value& doc) {
  return std::to_string(expires_unix_ms) + " " + json::serialize(doc);
}

Task<AdminHash::Write> AdminHash::Put(std::vector<std::string> id_and_stored) {
  const Executor executor = co_await asio::this_coro::executor;
  StoreReply reply(executor);
  redis_.RunAdmin(store::RedisAux::kBlocksPut, {hash_key_, version_key_}, id_and_stored, &reply,
                  nullptr);
  // (GCC 12 miscompiles co_await in conditions: keep it a statement.)
  const store::StoreStatus status = co_await reply.Wait();
  if (status != store::StoreStatus::kOk) co_return Write::kFailed;
  if (version_ < 0 || reply.count() != version_ + 1) co_return Write::kMoved;
  version_ = reply.count();
  co_return Write::kSoleChange;
}

Task<std::optional<bool>> AdminHash::Remove(std::string id) {
  const Executor executor = co_await asio::this_coro::executor;
  StoreReply reply(executor);
  redis_.RunAdmin(store::RedisAux::kBlocksDelete, {hash_key_, version_key_}, {id}, &reply,
                  nullptr);
  const store::StoreStatus status = co_await reply.Wait();
  if (status != store::StoreStatus::kOk) co_return std::nullopt;
  co_return reply.count() == 1;
}

Task<AdminHash::Read> AdminHash::ReadIfChanged(std::int64_t purge_unix_ms,
                                               std::vector<Entry>& entries) {
  const Executor executor = co_await asio::this_coro::executor;
  StoreReply reply(executor);
  const std::string version = std::to_string(version_);
  const std::string purge = purge_unix_ms > 0 ? std::to_string(purge_unix_ms) : std::string();
  redis_.RunAdmin(store::RedisAux::kBlocksRead, {hash_key_, version_key_}, {version, purge},
                  nullptr, &reply);
  const store::StoreStatus status = co_await reply.Wait();
  if (status != store::StoreStatus::kOk || reply.values().size() != 1) co_return Read::kFailed;
  if (reply.values()[0] == version_) co_return Read::kUnchanged;
  entries.clear();
  for (const std::string& stored : reply.texts()) {
    const std::size_t space = stored.find(' ');
    boost::system::error_code ec;
    json::value doc = json::parse(
        space == std::string::npos ? std::string_view() : std::string_view(stored).substr(space + 1),
        ec);
    if (ec) doc = nullptr;
    entries.push_back({stored, std::move(doc)});
  }
  version_ = reply.values()[0];
  co_return Read::kChanged;
}

}  // namespace tollgate::gateway
