// The admin status page (GET /): one self-contained HTML document, no
// external assets, that draws /status.json every second.
#pragma once

#include <string_view>

namespace tollgate::gateway {

extern const std::string_view kStatusPage;  // gateway/status_page.html, embedded at build time

}  // namespace tollgate::gateway
