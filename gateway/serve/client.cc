#include "gateway/serve/client.h"

#include <utility>

#include "gateway/telemetry/thread_metrics.h"

namespace tollgate::gateway {

ClientCount::ClientCount(Worker& worker, std::size_t listener) : worker_(&worker) {
  if (ThreadMetrics* metrics = worker.metrics()) {
    metric_listener_ = worker.Current()->state->listener_ids[listener];
    metrics->AddConnections(metric_listener_, 1);
  }
}

ClientCount::ClientCount(ClientCount&& other) noexcept
    : worker_(std::exchange(other.worker_, nullptr)),
      connection_(std::exchange(other.connection_, nullptr)),
      metric_listener_(other.metric_listener_) {}

ClientCount::~ClientCount() {
  if (worker_ == nullptr) return;
  if (ThreadMetrics* metrics = worker_->metrics()) metrics->AddConnections(metric_listener_, -1);
  if (connection_ != nullptr) worker_->Unregister(connection_);
}

void ClientCount::Serve(ClientConnection* connection) {
  if (connection_ == nullptr) {
    worker_->Register(connection);
  } else {
    worker_->Replace(connection_, connection);
  }
  connection_ = connection;
}

AcceptedClient::AcceptedClient(Worker& worker, AnyStream s, std::size_t listener_index,
                               const tcp::endpoint& peer)
    : count(worker, listener_index),
      stream(std::move(s)),
      listener(listener_index),
      peer_ip(peer.address().to_string()),
      peer_address(rules::IpAddress::Parse(peer_ip).value_or(rules::IpAddress{})) {}

}  // namespace tollgate::gateway
