// Request data may hold any bytes; JSON must be UTF-8, and a text log line
// or a terminal must not get control characters. Pure; thread-safe.
#pragma once

#include <string>
#include <string_view>

namespace tollgate::gateway {

// `in` with every invalid UTF-8 sequence (including overlong forms and
// surrogates) replaced by U+FFFD.
std::string ValidUtf8(std::string_view in);

// `in` with '"', '\\' and the control characters (below 0x20, 0x7F, and
// the C1 controls U+0080..U+009F in UTF-8: both bytes) written as \xNN, as
// nginx writes quoted fields of its access log: a newline in a value cannot
// start a forged line.
std::string EscapeLogText(std::string_view in);

// `in` with every invalid UTF-8 sequence replaced by U+FFFD (ValidUtf8) and
// the control characters written as \xNN (quotes and backslashes kept): what
// a terminal may be shown of a server's text, no escape sequence reaching it.
std::string TerminalText(std::string_view in);

}  // namespace tollgate::gateway
