#include "rules/route_table.h"

#include <algorithm>
#include <cctype>
#include <string>

namespace tollgate::rules {

std::string_view HostName(std::string_view host) {
  std::size_t end = host.size();
  const std::size_t colon = host.rfind(':');
  if (colon != std::string_view::npos && host.find(']') == std::string_view::npos) {
    end = colon;
  } else if (colon != std::string_view::npos && colon > host.rfind(']')) {
    end = colon;
  }
  return host.substr(0, end);
}

bool SameHostName(std::string_view host, std::string_view name) {
  const std::string_view a = HostName(host);
  const std::string_view b = HostName(name);
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
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
  for (const RouteConfig* r : ordered_) {
    if (path.substr(0, r->path_prefix.size()) != r->path_prefix) continue;
    if (!r->host.empty() && !SameHostName(host, r->host)) continue;
    return r;
  }
  return nullptr;
}

}  // namespace tollgate::rules
