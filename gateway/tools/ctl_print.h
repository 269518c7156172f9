// `tollgate ctl`'s output for people: the admin API's answers as tables
// and sentences, the server's text fit for a terminal.
#pragma once

#include <boost/json/object.hpp>
#include <boost/json/value.hpp>
#include <iosfwd>
#include <string>

namespace tollgate::gateway::ctl {

// What the server sent, fit for a terminal: its control characters escaped.
std::string Text(const boost::json::value& v);

// Milliseconds (a JSON integer) as whole seconds, rounded up.
std::string Seconds(const boost::json::value& ms);

// The successful answer `doc` to `command` ("rules", "keys", "reset",
// "block", "unblock", "blocks", "override set", "override list",
// "override remove").
void PrintAnswer(const std::string& command, const boost::json::object& doc, std::ostream& out);

}  // namespace tollgate::gateway::ctl
