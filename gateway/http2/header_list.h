// Header fields on their way into nghttp2, shared by the server side
// (connection.cc) and the client side (upstream_session.cc).
#pragma once

#include <nghttp2/nghttp2.h>

#include <algorithm>
#include <cstddef>
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
// submitted. Names are kept in lower case, as HTTP/2 requires. All the bytes
// live in one buffer, so that a header list costs three allocations however
// many fields it has; Get() gives pointers into it, valid until the next Add.
class HeaderList {
 public:
  HeaderList() {
    bytes_.reserve(kTypicalBytes);
    fields_.reserve(kTypicalFields);
  }

  void Add(std::string_view name, std::string_view value) {
    const std::size_t at = bytes_.size();
    bytes_.append(name);
    std::transform(bytes_.begin() + static_cast<std::ptrdiff_t>(at), bytes_.end(),
                   bytes_.begin() + static_cast<std::ptrdiff_t>(at), Lower);
    bytes_.append(value);
    fields_.push_back(Field{at, name.size(), value.size()});
  }

  const nghttp2_nv* Get() {
    nv_.clear();
    nv_.reserve(fields_.size());
    auto* base = reinterpret_cast<std::uint8_t*>(bytes_.data());
    for (const Field& f : fields_) {
      nv_.push_back(nghttp2_nv{base + f.at, base + f.at + f.name_size, f.name_size, f.value_size,
                               NGHTTP2_NV_FLAG_NONE});
    }
    return nv_.data();
  }

  std::size_t size() const { return fields_.size(); }

 private:
  // Enough for most responses' and requests' fields without growing.
  static constexpr std::size_t kTypicalBytes = 512;
  static constexpr std::size_t kTypicalFields = 16;

  struct Field {
    std::size_t at;  // of the name in bytes_; the value follows it
    std::size_t name_size;
    std::size_t value_size;
  };
  std::string bytes_;
  std::vector<Field> fields_;
  std::vector<nghttp2_nv> nv_;
};

}  // namespace tollgate::gateway::http2_detail
