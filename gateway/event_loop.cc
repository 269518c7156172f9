#include "gateway/event_loop.h"

#include <boost/asio/io_context.hpp>

#include "store/loop_time.h"

namespace tollgate::gateway {

std::size_t RunEventLoop(boost::asio::io_context& io) {
  const store::LoopTimeCaching caching;
  std::size_t handlers = 0;
  while (io.run_one() != 0) {
    ++handlers;
    store::ForgetLoopTime();
  }
  return handlers;
}

}  // namespace tollgate::gateway
