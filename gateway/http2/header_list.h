// Header fields on their way into nghttp2, shared by the server side
// (stream.cc) and the client side (upstream_connection.cc, upstream_link.cc).
#pragma once

#include <nghttp2/nghttp2.h>

#include <algorithm>
#include <array>
#include <boost/beast/http/field.hpp>
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

inline bool HasUpper(std::string_view s) {
  return std::any_of(s.begin(), s.end(), [](char c) { return c >= 'A' && c <= 'Z'; });
}

// Fields that HTTP/2 forbids (RFC 9113 §8.2.2).
inline bool ConnectionSpecific(std::string_view name) {
  return IEquals(name, "connection") || IEquals(name, "keep-alive") ||
         IEquals(name, "proxy-connection") || IEquals(name, "transfer-encoding") ||
         IEquals(name, "upgrade") || IEquals(name, "te");
}
// The same for a field Beast knows (each of the six is one).
inline bool ConnectionSpecific(boost::beast::http::field f) {
  using boost::beast::http::field;
  return f == field::connection || f == field::keep_alive || f == field::proxy_connection ||
         f == field::transfer_encoding || f == field::upgrade || f == field::te;
}

// The lower-case name of a field Beast knows ("" for field::unknown), in
// storage that lives for the program: built on the first call (one
// allocation per name, ~380), a lookup after.
inline std::string_view LowerName(boost::beast::http::field f) {
  constexpr std::size_t kCount = static_cast<std::size_t>(boost::beast::http::field::xref) + 1;
  static const std::array<std::string, kCount> names = [] {
    std::array<std::string, kCount> lower;
    for (std::size_t i = 1; i < kCount; ++i) {
      const std::string_view name = boost::beast::http::to_string(static_cast<boost::beast::http::field>(i));
      lower[i].resize(name.size());
      std::transform(name.begin(), name.end(), lower[i].begin(), Lower);
    }
    return lower;
  }();
  const auto i = static_cast<std::size_t>(f);
  return i < kCount ? std::string_view(names[i]) : std::string_view();
}

// Name/value pairs for nghttp2, which copies them when the frame is
// submitted (but for AddStaticName's names, which live for the program).
// Names are handed over in lower case, as HTTP/2 requires. Add copies name
// and value into one buffer of the list's (the list may outlive
// what it was built from); AddView copies nothing it need not, for a list
// submitted before its sources change. Clear() keeps the storage, so that a
// list reused for every response allocates nothing once it has grown
// (until Release()).
// Get() gives pointers valid until the next Add/AddView/Clear.
class HeaderList {
 public:
  HeaderList() { Reserve(); }

  // Copies both.
  void Add(std::string_view name, std::string_view value) {
    const std::size_t at = bytes_.size();
    bytes_.append(name);
    if (HasUpper(name)) {
      std::transform(bytes_.begin() + static_cast<std::ptrdiff_t>(at), bytes_.end(),
                     bytes_.begin() + static_cast<std::ptrdiff_t>(at), Lower);
    }
    bytes_.append(value);
    fields_.push_back(Field{nullptr, nullptr, at, at + name.size(), name.size(), value.size(),
                            NGHTTP2_NV_FLAG_NONE});
  }

  // Copies neither when `name` is in lower case (the name lower-cased when
  // not): both must stay valid until the list has been submitted.
  void AddView(std::string_view name, std::string_view value) {
    if (!HasUpper(name)) {
      fields_.push_back(Field{name.data(), value.data(), 0, 0, name.size(), value.size(),
                              NGHTTP2_NV_FLAG_NONE});
      return;
    }
    const std::size_t at = bytes_.size();
    bytes_.resize(at + name.size());
    std::transform(name.begin(), name.end(), bytes_.begin() + static_cast<std::ptrdiff_t>(at),
                   Lower);
    fields_.push_back(Field{nullptr, value.data(), at, 0, name.size(), value.size(),
                            NGHTTP2_NV_FLAG_NONE});
  }

  // A lower-case name in storage that lives for the program (LowerName's,
  // a literal), not scanned and not copied by nghttp2 either
  // (NGHTTP2_NV_FLAG_NO_COPY_NAME); the value as AddView's.
  void AddStaticName(std::string_view lower_name, std::string_view value) {
    fields_.push_back(Field{lower_name.data(), value.data(), 0, 0, lower_name.size(),
                            value.size(), NGHTTP2_NV_FLAG_NO_COPY_NAME});
  }

  void Clear() {
    bytes_.clear();
    fields_.clear();
    if (fields_.capacity() == 0) Reserve();  // after Release()
  }
  // Gives the storage back (a list kept by an idle connection); the next
  // Clear() takes it again.
  void Release() {
    std::string().swap(bytes_);
    std::vector<Field>().swap(fields_);
    std::vector<nghttp2_nv>().swap(nv_);
  }

  const nghttp2_nv* Get() {
    nv_.clear();
    nv_.reserve(fields_.size());
    auto* base = reinterpret_cast<std::uint8_t*>(bytes_.data());
    const auto at = [base](const char* p, std::size_t offset) {
      return p != nullptr ? reinterpret_cast<std::uint8_t*>(const_cast<char*>(p)) : base + offset;
    };
    for (const Field& f : fields_) {
      nv_.push_back(nghttp2_nv{at(f.name, f.name_at), at(f.value, f.value_at), f.name_size,
                               f.value_size, f.flags});
    }
    return nv_.data();
  }

  std::size_t size() const { return fields_.size(); }

 private:
  // Enough for most responses' and requests' fields without growing.
  static constexpr std::size_t kTypicalBytes = 512;
  static constexpr std::size_t kTypicalFields = 16;

  void Reserve() {
    bytes_.reserve(kTypicalBytes);
    fields_.reserve(kTypicalFields);
  }

  struct Field {
    const char* name;   // null: at name_at in bytes_
    const char* value;  // null: at value_at in bytes_
    std::size_t name_at;
    std::size_t value_at;
    std::size_t name_size;
    std::size_t value_size;
    std::uint8_t flags;  // NGHTTP2_NV_FLAG_*
  };
  std::string bytes_;
  std::vector<Field> fields_;
  std::vector<nghttp2_nv> nv_;
};

}  // namespace tollgate::gateway::http2_detail
