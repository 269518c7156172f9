// Endpoint: what the server side of an HTTP/2 connection (connection.h)
// and the client side towards an upstream (upstream_link.h) share between a
// socket and an nghttp2 session: the frames taken from the session and not
// yet written, the three loops that move them, and one lifetime model.
//
// The loops:
//   - the reader feeds what the peer sends to the session (Feed), reading
//     nothing while max_outbound_bytes of frames wait to be written (a peer
//     that does not read what it is sent cannot make us buffer more);
//   - the writer takes frames from the session (Pull) and writes them, one
//     write in flight, each within write_timeout;
//   - the watchdog ends a connection idle for idle_timeout (GOAWAY
//     NO_ERROR) and runs the side's own deadlines (Watch).
//
// Lifetime: the reader is the endpoint's life. Its caller starts it (the
// server awaits it from Run; the client spawns it holding a shared_ptr),
// and it returns only once the connection has ended and every other task
// of the endpoint (the writer, the watchdog, and what a side adds through
// AddTask/TaskDone: the server's stream handlers) has ended too. Whoever
// keeps the reader's caller alive keeps the endpoint alive long enough.
//
// A side supplies what differs through virtual hooks, each called once per
// read, per write or per watchdog turn (never per frame).
//
// Single-threaded: everything runs on the socket's executor.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "gateway/http2/frame_reader.h"
#include "gateway/http2/types.h"
#include "gateway/io/net.h"

struct nghttp2_session;

namespace tollgate::gateway::http2_detail {

struct EndpointLimits {
  std::size_t max_outbound_bytes;  // frames taken from nghttp2 per write
  std::chrono::milliseconds write_timeout;
  std::chrono::milliseconds idle_timeout;
};

class Endpoint {
 public:
  Endpoint(const Endpoint&) = delete;
  Endpoint& operator=(const Endpoint&) = delete;

 protected:
  using Clock = std::chrono::steady_clock;
  // How the writer ended: the session wants nothing more and all is
  // written; a write failed or timed out; the connection ended first.
  enum class WriterEnd { kFinished, kFailed, kStopped };

  // `stream` must outlive the endpoint.
  Endpoint(AnyStream& stream, const EndpointLimits& limits);
  virtual ~Endpoint();  // deletes session_

  // The writer and the watchdog, as tasks of the endpoint; each holds
  // `keeper` (if any) until it ends.
  void StartLoops(const std::shared_ptr<void>& keeper = nullptr);
  // The reader (see the lifetime above).
  Task<void> ReadLoop();
  // A task of the side's own starts or ends (the reader waits for it).
  void AddTask() { ++tasks_; }
  void TaskDone();

  // Frames from the session into pending_, up to max_outbound_bytes.
  void Pull();
  // The writer has something to do.
  void Kick() { write_wake_.Notify(); }
  // Our GOAWAY `code` (nghttp2's error code); the connection ends once the
  // streams below it have. Once only.
  void EndSession(std::uint32_t code);
  // Gives back the output buffers that hold nothing now (and OpenSSL's
  // record buffers): for a connection with no stream open.
  void ReleaseOutput();
  // Closes the socket and wakes every loop (they see dead_ and end).
  void CloseSocket();

  // What a read brought: into the session.
  virtual void Feed(const std::uint8_t* data, std::size_t size) = 0;
  // nghttp2 failed taking frames from it (PullFrames' error).
  virtual void OnSessionError(int nghttp2_error) = 0;
  // The reader stopped: `ec` is the read's error, none when the connection
  // ended or the side stopped it (finishing_, fatal_).
  virtual void OnReaderEnd(ErrorCode ec) = 0;
  virtual void OnWriterEnd(WriterEnd end) = 0;
  // Everything is over, lingering included: the connection ends now.
  virtual void OnClosed() = 0;
  // The writer has written all it had and waits.
  virtual void OnOutputIdle() {}
  // Whether idle_timeout runs (from idle_since_) now.
  virtual bool Idle() const = 0;
  // idle_timeout passed; the GOAWAY follows.
  virtual void OnIdleTimeout() {}
  // The side's own deadlines: does what is due at `now`, and returns the
  // next one (Clock::time_point::max() when none).
  virtual Clock::time_point Watch(Clock::time_point now);

  AnyStream& stream_;
  Executor executor_;
  const EndpointLimits limits_;
  nghttp2_session* session_ = nullptr;
  std::string pending_;  // frames taken from nghttp2, not yet written
  std::string writing_;  // the write in flight; empty when none is
  FrameReader reader_;
  Wakeup write_wake_;
  Wakeup read_wake_;  // output drained, or the end
  Wakeup done_wake_;  // a task ended
  Timer watchdog_;
  Clock::time_point idle_since_;
  std::size_t tasks_ = 0;
  bool fatal_ = false;        // nghttp2 failed: no more frames from it
  bool terminating_ = false;  // a GOAWAY that ends the connection is queued
  bool finishing_ = false;    // all written: the sending side is shut
  bool dead_ = false;

 private:
  Task<void> WriteLoop();
  Task<void> WatchLoop();
  void Spawn(Task<void> task, const std::shared_ptr<void>& keeper);
};

}  // namespace tollgate::gateway::http2_detail
