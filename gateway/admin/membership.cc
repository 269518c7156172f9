#include "gateway/admin/membership.h"

#include <fmt/format.h>
#include <unistd.h>

#include <array>
#include <random>

#include "gateway/admin/store_reply.h"
#include "store/redis_store.h"

namespace tollgate::gateway {
namespace {

std::string GatewayId() {
  std::array<char, 256> host{};
  if (gethostname(host.data(), host.size() - 1) != 0) host[0] = '\0';
  std::random_device random;
  return fmt::format("{}:{}:{:08x}", host.data(), getpid(), random());
}

}  // namespace

Membership::Membership(store::RedisStore& redis, store::FleetSize& fleet,
                       store::RedisClockOffset& offset, const store::Clock& clock)
    : redis_(redis),
      fleet_(fleet),
      offset_(offset),
      clock_(clock),
      key_(store::RedisTaggedKey(redis.options().prefix, "admin", "", "members")),
      id_(GatewayId()) {}

void Membership::Start(asio::io_context& io) {
  timer_.emplace(io.get_executor());
  asio::co_spawn(io, Beat(), asio::detached);
}

void Membership::Stop() {
  if (stopped_) return;
  stopped_ = true;
  if (timer_) timer_->cancel();
  redis_.RunAdmin(store::RedisAux::kMembers, {key_}, {id_, "0"}, nullptr, nullptr);
}

Task<void> Membership::Beat() {
  const std::string lasts = std::to_string(kLasts.count());
  while (!stopped_) {
    StoreReply reply(co_await asio::this_coro::executor);
    redis_.RunAdmin(store::RedisAux::kMembers, {key_}, {id_, lasts}, nullptr, &reply);
    if (co_await reply.Wait() == store::StoreStatus::kOk && !stopped_ &&
        reply.values().size() == 2) {
      fleet_.Set(reply.values()[0]);
      offset_.Learn(reply.values()[1], clock_.NowMs());
    }
    if (stopped_) break;
    timer_->expires_after(kHeartbeat);
    co_await timer_->async_wait(kUseTuple);
  }
}

}  // namespace tollgate::gateway
