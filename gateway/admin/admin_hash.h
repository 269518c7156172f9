// One admin hash shared by every gateway on a Redis (store/lua/admin/
// blocks_*.lua): the blocks and the overrides each keep their entries in
// one, with a version counter that moves on every change so that each
// gateway reads the hash again only when it changed. An entry is stored as
// "<expires_unix_ms> <the entry as JSON>". Admin thread only.
#pragma once

#include <boost/json/value.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gateway/io/net.h"

namespace tollgate::store {
class RedisStore;
}  // namespace tollgate::store

namespace tollgate::gateway {

class AdminHash {
 public:
  // `redis` must outlive it; `name` names the hash under the store's
  // prefix ("blocks", "overrides").
  AdminHash(store::RedisStore& redis, std::string_view name);

  // The stored form of an entry that ends at expires_unix_ms.
  static std::string Stored(std::int64_t expires_unix_ms, const boost::json::value& doc);

  enum class Write { kFailed, kSoleChange, kMoved };
  // Sets the entries of `id_and_stored` (id, stored form, id, ...). kFailed:
  // Redis did not answer, nothing changed. kSoleChange: the hash was at the
  // version last read and only this write moved it, so the writer may apply
  // its entries without reading them back (the version read is now the
  // new one). kMoved: somebody else changed it too; Read() again.
  Task<Write> Put(std::vector<std::string> id_and_stored);

  // Removes the entry `id`: whether it was there; nullopt when Redis did
  // not answer.
  Task<std::optional<bool>> Remove(std::string id);

  // One entry as read: its stored form, and its JSON (null when it does not
  // parse: the caller says so and leaves it out).
  struct Entry {
    std::string stored;
    boost::json::value doc;
  };
  enum class Read { kFailed, kUnchanged, kChanged };
  // kChanged with every entry in `entries` when the version moved since the
  // last read. purge_unix_ms > 0 also drops from the hash the entries over
  // at that time (the first gateway that sees one does: the hash stays as
  // small as the entries in force).
  Task<Read> ReadIfChanged(std::int64_t purge_unix_ms, std::vector<Entry>& entries);

 private:
  store::RedisStore& redis_;
  std::string hash_key_, version_key_;
  std::int64_t version_ = -1;  // as last read; -1 before the first read
};

}  // namespace tollgate::gateway
