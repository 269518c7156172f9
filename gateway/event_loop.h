// RunEventLoop: how a gateway thread runs its io_context. Like io.run(),
// and store::LoopNow() on that thread reads the clock at most once per
// handler (store/loop_time.h).
#pragma once

#include <cstddef>

namespace boost::asio {
class io_context;
}  // namespace boost::asio

namespace tollgate::gateway {

// Runs `io` until it stops or runs out of work, on the calling thread; the
// number of handlers run.
std::size_t RunEventLoop(boost::asio::io_context& io);

}  // namespace tollgate::gateway
