#include "gateway/budget/json_fields.h"

#include <boost/json/basic_parser_impl.hpp>
#include <cmath>
#include <limits>

namespace tollgate::gateway::budget {
namespace {

namespace json = boost::json;
using json::error_code;

// Longer keys match no wanted path: they are not kept whole.
constexpr std::size_t kMaxKey = 256;

// One name of a dotted path: an object key, and the array index it names
// when it is a decimal number (-1 otherwise), so that an element is
// matched without formatting its index.
struct Segment {
  std::string key;
  std::int64_t index = -1;
};

std::vector<Segment> Split(const std::string& path) {
  std::vector<Segment> segments;
  std::size_t start = 0;
  for (;;) {
    const std::size_t dot = path.find('.', start);
    Segment& s = segments.emplace_back();
    s.key = path.substr(start, dot == std::string::npos ? dot : dot - start);
    // A canonical decimal ("7", not "007"): an index as JSON counts it.
    if (!s.key.empty() && s.key.size() <= 18 && (s.key == "0" || s.key[0] != '0') &&
        s.key.find_first_not_of("0123456789") == std::string::npos) {
      s.index = std::stoll(s.key);
    }
    if (dot == std::string::npos) return segments;
    start = dot + 1;
  }
}

struct Handler {
  // No bounds beyond the parser's own depth limit: sizes are not stored.
  static constexpr std::size_t max_array_size = std::size_t(-1);
  static constexpr std::size_t max_object_size = std::size_t(-1);
  static constexpr std::size_t max_string_size = std::size_t(-1);
  static constexpr std::size_t max_key_size = std::size_t(-1);

  struct Frame {
    bool array = false;
    // Some wanted path goes on inside this container: what is not is
    // parsed (it must be, to find where it ends) but not followed.
    bool live = false;
    std::size_t next_index = 0;  // arrays: elements started so far
    std::string key;             // objects, when live: the key of the current member
    bool key_too_long = false;
  };

  std::vector<std::vector<Segment>> wanted;
  std::vector<std::optional<std::int64_t>> numbers;
  std::vector<std::optional<std::string>> strings;
  std::vector<Frame> frames;
  std::string key;  // a key being read in parts
  bool key_too_long = false;
  std::string string;  // a wanted string being read in parts
  int string_for = -1;  // which path the string being read is for; -1: none

  void Clear() {
    for (auto& n : numbers) n.reset();
    for (auto& s : strings) s.reset();
    frames.clear();
    key.clear();
    key_too_long = false;
    string.clear();
    string_for = -1;
  }

  // Whether the first `depth` names of `path` are those of the values
  // being read (frames[0, depth)).
  bool Matches(const std::vector<Segment>& path, std::size_t depth) const {
    for (std::size_t i = 0; i < depth; ++i) {
      const Frame& f = frames[i];
      // An array's: the element being read.
      const bool match = f.array ? path[i].index == static_cast<std::int64_t>(f.next_index) - 1
                                 : !f.key_too_long && path[i].key == f.key;
      if (!match) return false;
    }
    return true;
  }

  // The wanted path the value that starts now is at; -1: none. Moves an
  // array's index on.
  int ValueStarts() {
    if (!frames.empty()) {
      Frame& top = frames.back();
      if (top.array) ++top.next_index;
      if (!top.live) return -1;
    }
    for (std::size_t w = 0; w < wanted.size(); ++w) {
      if (wanted[w].size() == frames.size() && Matches(wanted[w], frames.size())) {
        return static_cast<int>(w);
      }
    }
    return -1;
  }

  // Opens the container that starts now, live if a wanted path goes on
  // inside it.
  void ContainerStarts(bool array) {
    ValueStarts();
    bool live = frames.empty() || frames.back().live;
    if (live) {
      live = false;
      for (const auto& path : wanted) {
        if (path.size() > frames.size() && Matches(path, frames.size())) {
          live = true;
          break;
        }
      }
    }
    frames.push_back({array, live, 0, {}, false});
  }

  void KeepNumber(int w, std::int64_t value) {
    if (w >= 0) numbers[static_cast<std::size_t>(w)] = value;
  }

  bool on_document_begin(error_code&) { return true; }
  bool on_document_end(error_code&) { return true; }
  bool on_array_begin(error_code&) {
    ContainerStarts(true);
    return true;
  }
  bool on_array_end(std::size_t, error_code&) {
    frames.pop_back();
    return true;
  }
  bool on_object_begin(error_code&) {
    ContainerStarts(false);
    return true;
  }
  bool on_object_end(std::size_t, error_code&) {
    frames.pop_back();
    return true;
  }
  bool on_string_part(json::string_view s, std::size_t n, error_code&) {
    if (n == s.size()) string_for = ValueStarts();  // the first part
    if (string_for >= 0) {
      if (string.size() + s.size() <= JsonFields::kMaxString) {
        string.append(s.data(), s.size());
      } else {
        string_for = -2;  // too long: not kept
      }
    }
    return true;
  }
  bool on_string(json::string_view s, std::size_t n, error_code&) {
    if (n == s.size()) string_for = ValueStarts();  // in one part
    if (string_for >= 0 && string.size() + s.size() <= JsonFields::kMaxString) {
      string.append(s.data(), s.size());
      strings[static_cast<std::size_t>(string_for)] = std::move(string);
    }
    string.clear();
    string_for = -1;
    return true;
  }
  void AppendKey(json::string_view s) {
    if (key.size() + s.size() <= kMaxKey) {
      key.append(s.data(), s.size());
    } else {
      key_too_long = true;
    }
  }
  bool on_key_part(json::string_view s, std::size_t, error_code&) {
    if (frames.back().live) AppendKey(s);
    return true;
  }
  bool on_key(json::string_view s, std::size_t, error_code&) {
    Frame& f = frames.back();
    if (!f.live) return true;
    AppendKey(s);
    f.key = std::move(key);
    f.key_too_long = key_too_long;
    key.clear();
    key_too_long = false;
    return true;
  }
  bool on_number_part(json::string_view, error_code&) { return true; }
  bool on_int64(std::int64_t i, json::string_view, error_code&) {
    const int w = ValueStarts();
    if (i >= 0) KeepNumber(w, i);
    return true;
  }
  bool on_uint64(std::uint64_t u, json::string_view, error_code&) {
    KeepNumber(ValueStarts(), static_cast<std::int64_t>(
                                  std::min<std::uint64_t>(u, std::numeric_limits<std::int64_t>::max())));
    return true;
  }
  bool on_double(double d, json::string_view, error_code&) {
    const int w = ValueStarts();
    if (std::isfinite(d) && d >= 0) {
      const double up = std::ceil(d);
      KeepNumber(w, up >= 9.2e18 ? std::numeric_limits<std::int64_t>::max()
                                 : static_cast<std::int64_t>(up));
    }
    return true;
  }
  bool on_bool(bool b, error_code&) {
    KeepNumber(ValueStarts(), b ? 1 : 0);
    return true;
  }
  bool on_null(error_code&) {
    ValueStarts();
    return true;
  }
  bool on_comment_part(json::string_view, error_code&) { return true; }
  bool on_comment(json::string_view, error_code&) { return true; }
};

}  // namespace

struct JsonFields::Impl {
  explicit Impl(const std::vector<std::string>& paths) : parser(json::parse_options{}) {
    Handler& h = parser.handler();
    for (const std::string& p : paths) h.wanted.push_back(Split(p));
    h.numbers.resize(paths.size());
    h.strings.resize(paths.size());
  }
  json::basic_parser<Handler> parser;
  bool failed = false;
};

JsonFields::JsonFields(const std::vector<std::string>& paths)
    : impl_(std::make_unique<Impl>(paths)) {}
JsonFields::~JsonFields() = default;
JsonFields::JsonFields(JsonFields&&) noexcept = default;
JsonFields& JsonFields::operator=(JsonFields&&) noexcept = default;

bool JsonFields::Feed(std::string_view bytes) {
  if (impl_->failed) return false;
  error_code ec;
  impl_->parser.write_some(true, bytes.data(), bytes.size(), ec);
  if (ec) impl_->failed = true;
  return !impl_->failed;
}

bool JsonFields::Finish() {
  if (impl_->failed) return false;
  error_code ec;
  impl_->parser.write_some(false, nullptr, 0, ec);
  if (ec || !impl_->parser.done()) impl_->failed = true;
  return !impl_->failed;
}

void JsonFields::Reset() {
  impl_->parser.reset();
  impl_->parser.handler().Clear();
  impl_->failed = false;
}

std::optional<std::int64_t> JsonFields::Number(std::size_t i) const {
  return impl_->parser.handler().numbers.at(i);
}

std::optional<std::string_view> JsonFields::String(std::size_t i) const {
  const auto& s = impl_->parser.handler().strings.at(i);
  if (!s) return std::nullopt;
  return std::string_view(*s);
}

std::optional<std::int64_t> NumberAt(std::string_view text, const std::string& path) {
  JsonFields fields({path});
  if (!fields.Feed(text) || !fields.Finish()) return std::nullopt;
  return fields.Number(0);
}

}  // namespace tollgate::gateway::budget
