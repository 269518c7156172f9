#include "gateway/io/wire_header.h"

#include <algorithm>
#include <charconv>
#include <cstring>

namespace tollgate::gateway {

namespace {

// Start lines are short: "HTTP/1.1" and the separators, or the status code.
constexpr std::size_t kStartLineOverhead = 16;

// What AppendFields appends.
std::size_t FieldsSize(const Fields& fields, std::string_view extra) {
  std::size_t size = extra.size() + 2;
  for (const auto& f : fields) size += f.name_string().size() + f.value().size() + 4;
  return size;
}

// "Name: value\r\n" per field, `extra` (whole lines) and the empty line that
// ends the header, `size` (FieldsSize's) bytes. The block is sized once and
// copied into, rather than the four pieces of each field appended (each
// append checks the string's capacity).
void AppendFields(const Fields& fields, std::string& out, std::string_view extra,
                  std::size_t size) {
  const std::size_t start = out.size();
  out.resize(start + size);
  char* at = out.data() + start;
  // copy_n, not memcpy: an empty view (`extra` by default) may have no data
  // pointer, which memcpy must not be given.
  const auto put = [&at](std::string_view s) { at = std::copy_n(s.data(), s.size(), at); };
  for (const auto& f : fields) {
    put(f.name_string());
    put(": ");
    put(f.value());
    put("\r\n");
  }
  put(extra);
  put("\r\n");
}

void AppendVersion(unsigned version, std::string& out) {
  out.append("HTTP/");
  out.push_back(static_cast<char>('0' + version / 10));
  out.push_back('.');
  out.push_back(static_cast<char>('0' + version % 10));
}

}  // namespace

void AppendWireHeader(const http::request_header<Fields>& header, std::string& out,
                      std::string_view extra) {
  // Sized once: the start line's pieces and the fields grew it two or three
  // times (a copy each time).
  const std::size_t fields_size = FieldsSize(header, extra);
  out.reserve(out.size() + header.method_string().size() + header.target().size() +
              kStartLineOverhead + fields_size);
  out.append(header.method_string().data(), header.method_string().size());
  out.push_back(' ');
  out.append(header.target().data(), header.target().size());
  out.push_back(' ');
  AppendVersion(header.version(), out);
  out.append("\r\n");
  AppendFields(header, out, extra, fields_size);
}

void AppendWireHeader(const http::response_header<Fields>& header, std::string& out,
                      std::string_view extra) {
  const std::size_t fields_size = FieldsSize(header, extra);
  out.reserve(out.size() + header.reason().size() + kStartLineOverhead + fields_size);
  AppendVersion(header.version(), out);
  out.push_back(' ');
  out.append(std::to_string(header.result_int()));
  out.push_back(' ');
  out.append(header.reason().data(), header.reason().size());
  out.append("\r\n");
  AppendFields(header, out, extra, fields_size);
}

void AppendChunkSizeLine(std::size_t size, std::string& out) {
  std::array<char, 18> line{};
  const auto [p, ec] = std::to_chars(line.data(), line.data() + 16, size, 16);
  out.append(line.data(), p);
  out += "\r\n";
}

void AppendLastChunk(const Fields& trailers, std::string& out) {
  out += "0\r\n";
  for (const auto& field : trailers) {
    out.append(field.name_string());
    out += ": ";
    out.append(field.value());
    out += "\r\n";
  }
  out += "\r\n";
}

void AddHeaderLines(std::string_view lines, Fields& fields) {
  while (!lines.empty()) {
    const std::size_t end = lines.find("\r\n");
    const std::string_view line = lines.substr(0, end);
    const std::size_t colon = line.find(": ");
    fields.insert(line.substr(0, colon), line.substr(colon + 2));
    lines.remove_prefix(end + 2);
  }
}

}  // namespace tollgate::gateway
