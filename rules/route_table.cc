#include "rules/route_table.h"

#include <algorithm>
#include <cctype>
#include <string>

namespace tollgate::rules {

std::string NormalizeHost(std::string_view host) {
  std::size_t end = host.size();
  const std::size_t colon = host.rfind(':');
  if (colon != std::string_view::npos && host.find(']') == std::string_view::npos) {
    end = colon;
  } else if (colon != std::string_view::npos && colon > host.rfind(']')) {
    end = colon;
  }
  std::string out(host.substr(0, end));
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

RouteTable::RouteTable(const std::vector<RouteConfig>& routes) {
  for (const RouteConfig& r : routes) ordered_.push_back(&r);
  std::stable_sort(ordered_.begin(), ordered_.end(),
                   [](const RouteConfig* a, const RouteConfig* b) {
                     if (a->path_prefix.size() != b->path_prefix.size()) {
                       return a->path_prefix.size() > b->path_prefix.size();
                     }
                     return !a->host.empty() && b->host.empty();
                   });
}

const RouteConfig* RouteTable::Match(std::string_view host, std::string_view target) const {
  const std::string_view path = target.substr(0, target.find('?'));
  std::string normalized;
  bool normalized_ready = false;
  for (const RouteConfig* r : ordered_) {
    if (path.substr(0, r->path_prefix.size()) != r->path_prefix) continue;
    if (!r->host.empty()) {
      if (!normalized_ready) {
        normalized = NormalizeHost(host);
        normalized_ready = true;
      }
      if (NormalizeHost(r->host) != normalized) continue;
    }
    return r;
  }
  return nullptr;
}

}  // namespace tollgate::rules
