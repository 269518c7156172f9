// Header fields on their way into nghttp2, shared by the server side
// (connection.cc) and the client side (upstream_session.cc).
#pragma once

#include <nghttp2/nghttp2.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tollgate::gateway::http2_detail {

inline char Lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c + ('a' - 'A')) : c; }

inline bool IEquals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(),
                                            [](char x, char y) { return Lower(x) == Lower(y); });
}

// Fields that HTTP/2 forbids (RFC 9113 §8.2.2).
inline bool ConnectionSpecific(std::string_view name) {
  return IEquals(name, "connection") || IEquals(name, "keep-alive") ||
         IEquals(name, "proxy-connection") || IEquals(name, "transfer-encoding") ||
         IEquals(name, "upgrade") || IEquals(name, "te");
}

// Name/value pairs for nghttp2, which copies them when the frame is
// submitted. Names are kept in lower case, as HTTP/2 requires.
class HeaderList {
 public:
  void Add(std::string_view name, std::string_view value) {
    std::string lower(name.size(), '\0');
    std::transform(name.begin(), name.end(), lower.begin(), Lower);
    strings_.push_back(std::move(lower));
    strings_.emplace_back(value);
  }
  const nghttp2_nv* Get() {
    nv_.clear();
    for (std::size_t i = 0; i + 1 < strings_.size(); i += 2) {
      nv_.push_back(nghttp2_nv{
          reinterpret_cast<std::uint8_t*>(strings_[i].data()),
          reinterpret_cast<std::uint8_t*>(strings_[i + 1].data()), strings_[i].size(),
          strings_[i + 1].size(), NGHTTP2_NV_FLAG_NONE});
    }
    return nv_.data();
  }
  std::size_t size() const { return strings_.size() / 2; }

 private:
  std::vector<std::string> strings_;
  std::vector<nghttp2_nv> nv_;
};

}  // namespace tollgate::gateway::http2_detail
