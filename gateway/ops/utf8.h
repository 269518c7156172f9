// Request data may hold any bytes; JSON must be UTF-8. Pure; thread-safe.
#pragma once

#include <string>
#include <string_view>

namespace tollgate::gateway {

// `in` with every invalid UTF-8 sequence (including overlong forms and
// surrogates) replaced by U+FFFD.
std::string ValidUtf8(std::string_view in);

}  // namespace tollgate::gateway
