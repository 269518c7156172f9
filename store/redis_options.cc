#include "store/redis_options.h"

#include <fmt/format.h>

#include <boost/url/parse.hpp>
#include <charconv>

namespace tollgate::store {

std::optional<RedisAddress> ParseRedisUrl(std::string_view url, std::string& error) {
  auto parsed = boost::urls::parse_uri(url);
  if (!parsed || parsed->scheme() != "redis" || !parsed->has_authority()) {
    error = fmt::format("\"{}\" is not a redis://[user:password@]host:port[/db] URL", url);
    return std::nullopt;
  }
  RedisAddress out;
  out.host = parsed->host_address();
  if (out.host.empty()) out.host = "127.0.0.1";
  if (parsed->has_port()) {
    if (parsed->port_number() == 0) {
      error = fmt::format("\"{}\": the port must be 1..65535", url);
      return std::nullopt;
    }
    out.port = parsed->port_number();
  }
  if (parsed->has_userinfo()) {
    out.user = parsed->user();
    out.password = parsed->password();
  }
  std::string_view path = parsed->encoded_path();
  if (!path.empty() && path != "/") {
    path.remove_prefix(1);
    auto [end, ec] = std::from_chars(path.data(), path.data() + path.size(), out.db);
    if (ec != std::errc() || end != path.data() + path.size() || out.db < 0) {
      error = fmt::format("\"{}\": the database must be a number, as in redis://host:6379/0", url);
      return std::nullopt;
    }
  }
  return out;
}

}  // namespace tollgate::store
