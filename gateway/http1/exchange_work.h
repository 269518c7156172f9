// ExchangeWork: what one HTTP/1.1 exchange needs besides its connection
// (the request's bytes read, the strings it builds, its facts and its
// parsers, its admission and answer), taken when a request begins to arrive and given back when the
// connection goes idle, so that an idle connection holds none of it, as
// nginx's keep-alive connections hold no buffers. A Work given back keeps
// its buffers' capacity for the next connection of its thread that takes
// one (up to 64 spares per thread): a busy keep-alive connection allocates
// nothing per request.
// Thread-safety: a Work is used on one thread and given back on the thread
// that took it.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "gateway/core/admission.h"
#include "gateway/core/exchange.h"
#include "gateway/core/respond.h"
#include "gateway/core/services.h"
#include "gateway/io/net.h"

namespace tollgate::gateway {

struct ExchangeWork {
  explicit ExchangeWork(const CoreServices& s) : services(&s), admission(s) {}

  const CoreServices* services;  // the worker's whose admission this is
  Exchange exchange;
  Admission admission;
  Answer answer;  // what the connection writes for the current exchange
  std::optional<RequestParser<http::empty_body>> head;
  std::optional<RequestParser<http::string_body>> whole;  // a buffered request with its body
  std::optional<ResponseParser<http::empty_body>> res_head;
  // The request's bytes read and not yet parsed or relayed (pipelined
  // requests after it too).
  beast::flat_buffer buffer;
  std::string canonical;      // Canonicalize()'s output
  std::string wire;           // every buffered message the connection sends
  std::string extra_headers;  // rate-limit header lines for the current response
};

// A spare Work of this thread's for `services` (its worker's), or a new one.
std::unique_ptr<ExchangeWork> TakeExchangeWork(const CoreServices& services);

// Gives `work` back: the places its exchange holds are released, its
// parsers reset and its buffers emptied (their capacity kept); it becomes
// a spare, or is freed when the thread has enough.
void GiveBackExchangeWork(std::unique_ptr<ExchangeWork> work);

// Once `stream` is readable, the first bytes of a request: into the buffer
// of `work` (taken first when null, its buffer bounded by
// `max_header_bytes` plus a relay chunk). True when it read some or failed
// (`ec`); false when nothing was there after all (an event older than the
// last read that drained the socket, or a TLS record with no request bytes
// yet): the caller waits again, and may give the Work back meanwhile.
bool ReadRequestStart(AnyStream& stream, std::unique_ptr<ExchangeWork>& work,
                      const CoreServices& services, std::size_t max_header_bytes, ErrorCode& ec);

}  // namespace tollgate::gateway
