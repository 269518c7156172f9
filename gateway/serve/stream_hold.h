// HoldStream: ClientWatch::Hold (gateway/core/admission.h) for a handler of
// an HTTP/2 stream, whose client leaves by resetting the stream. Worker
// thread only.
#pragma once

#include <chrono>

#include "gateway/core/admission.h"
#include "gateway/io/io_types.h"

namespace tollgate::gateway {

class Http2Stream;

// Waits for `timer` (ClientWatch::Hold), unless `stream` is cancelled
// first. `slot` points at the timer while it waits: the handler's OnCancel
// callback cancels it there (a reset ends the wait at once).
Task<ClientWatch::Held> HoldStream(const Http2Stream& stream, Timer*& slot, Timer& timer);

}  // namespace tollgate::gateway
