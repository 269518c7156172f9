#include "gateway/io/tls_stream.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <new>

#include "gateway/io/plain_syscall.h"

namespace tollgate::gateway::tls_detail {

namespace {

Core* CoreOf(BIO* bio) { return static_cast<Core*>(BIO_get_data(bio)); }

int BioRead(BIO* bio, char* data, int size) {
  BIO_clear_retry_flags(bio);
  const int n = CoreOf(bio)->Receive(data, size);
  if (n == -1) BIO_set_retry_read(bio);
  return n < 0 ? -1 : n;
}

int BioWrite(BIO* bio, const char* data, int size) {
  BIO_clear_retry_flags(bio);
  return CoreOf(bio)->Append(data, size);
}

long BioCtrl(BIO* bio, int command, long /*number*/, void* /*pointer*/) {
  switch (command) {
    case BIO_CTRL_FLUSH:
      return 1;  // the stream sends the output after each step
    case BIO_CTRL_WPENDING:
      return static_cast<long>(CoreOf(bio)->unsent());
    default:
      return 0;
  }
}

BIO_METHOD* Method() {
  static BIO_METHOD* const method = [] {
    BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "tollgate socket");
    if (m == nullptr) throw std::bad_alloc();
    BIO_meth_set_read(m, BioRead);
    BIO_meth_set_write(m, BioWrite);
    BIO_meth_set_ctrl(m, BioCtrl);
    return m;
  }();
  return method;
}

}  // namespace

Core::Core(DeadlineStream next, SSL_CTX* ctx) : next_(std::move(next)), ssl_(SSL_new(ctx)) {
  BIO* bio = ssl_ != nullptr ? BIO_new(Method()) : nullptr;
  if (bio == nullptr) {
    SSL_free(ssl_);
    throw std::bad_alloc();  // as Asio's stream and operator new do
  }
  BIO_set_data(bio, this);
  BIO_set_init(bio, 1);
  SSL_set_bio(ssl_, bio, bio);
  // Released buffers: an idle connection holds none (nginx does the same).
  // Read-ahead: a receive takes all the socket holds, up to OpenSSL's
  // buffer, rather than a record header and then its body.
  // No TLS 1.2 renegotiation (nginx refuses it too): a write then never
  // has to read, nor a read to wait for a write.
  SSL_set_mode(ssl_, SSL_MODE_RELEASE_BUFFERS);
  SSL_set_read_ahead(ssl_, 1);
  SSL_set_options(ssl_, SSL_OP_NO_RENEGOTIATION);
  reader_.core = this;
  writer_.core = this;
}

Core::~Core() { SSL_free(ssl_); }

int Core::Receive(char* data, int size) {
  // This step took everything the socket held already: what OpenSSL asks
  // for now has not arrived (no recv() that would fail). After the end of
  // the stream nothing will.
  if (exhausted_ || eof_) return -1;
  ErrorCode ec;
  std::size_t bytes = 0;
  int queued = -1;
  if (!draining_detail::Receive(next_.socket().native_handle(),
                                asio::mutable_buffer(data, static_cast<std::size_t>(size)),
                                MSG_DONTWAIT, ec, bytes, queued)) {
    return -1;
  }
  if (ec == asio::error::eof) {
    // OpenSSL is not told (it would count it fatal, as an unexpected end:
    // an alert, the session dropped, no more writes; a read that timed out
    // could not answer 408): it waits for more, and Perform() reports the
    // end.
    eof_ = true;
    return -1;
  }
  if (ec) {
    io_error_ = ec;
    return -2;
  }
  if (bytes < static_cast<std::size_t>(size) && queued == 0) exhausted_ = true;
  return static_cast<int>(bytes);
}

int Core::Append(const char* data, int size) {
  out_.append(data, static_cast<std::size_t>(size));
  return size;
}

bool Core::Flush(ErrorCode& ec) {
  if (write_error_) {
    // Sending ended: what is written since goes nowhere.
    out_.clear();
    out_sent_ = 0;
    ec = write_error_;
    return false;
  }
  const int fd = next_.socket().native_handle();
  while (out_sent_ < out_.size()) {
    const ssize_t n = PlainSend(fd, out_.data() + out_sent_, out_.size() - out_sent_,
                                MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n >= 0) {
      out_sent_ += static_cast<std::size_t>(n);
      continue;
    }
    const int error = errno;
    if (error == EINTR) continue;
    if (error == EAGAIN || error == EWOULDBLOCK) return false;
    // Nothing more can be sent: every later write fails with it.
    write_error_ = ErrorCode(error, asio::error::get_system_category());
    ec = write_error_;
    break;
  }
  out_sent_ = 0;
  // Given back once sent, as OpenSSL's own buffers are
  // (SSL_MODE_RELEASE_BUFFERS): an idle connection holds none.
  std::string().swap(out_);
  return !ec;
}

std::size_t Core::TryWrite(asio::const_buffer data, ErrorCode& ec) {
  ERR_clear_error();
  std::size_t n = 0;
  const int result =
      SSL_write_ex(ssl_, data.data(), std::min(data.size(), kMaxWrite), &n);
  if (result <= 0) {
    const int error = SSL_get_error(ssl_, result);
    // One that would wait is left to the asynchronous write.
    if (error != SSL_ERROR_WANT_READ && error != SSL_ERROR_WANT_WRITE) ec = Failure(error);
    return 0;
  }
  Flush(ec);
  return ec ? 0 : n;
}

std::size_t Core::TryRead(asio::mutable_buffer buffer, ErrorCode& ec, bool& exhausted) {
  OpState op{this, Step::kRead, buffer.data(), buffer.size()};
  const Need need = Perform(op, ec);
  // Not done: OpenSSL wants more than the socket had (it said so).
  exhausted = need != Need::kDone || (exhausted_ && SSL_has_pending(ssl_) == 0);
  return need == Need::kDone && !ec ? op.done : 0;
}

ErrorCode Core::Failure(int ssl_error) {
  switch (ssl_error) {
    case SSL_ERROR_ZERO_RETURN:
      return asio::error::eof;  // the peer's close_notify
    case SSL_ERROR_SYSCALL:
      if (io_error_) return io_error_;
      if (write_error_) return write_error_;
      return ssl::error::unspecified_system_error;
    case SSL_ERROR_SSL: {
      const unsigned long error = ERR_get_error();
      if (error != 0) return ErrorCode(static_cast<int>(error), asio::error::get_ssl_category());
      break;
    }
    default:
      break;
  }
  // A callback's retry (none is installed that asks for one) or a wish to
  // write (the BIO takes every write): not a state this stream can go on
  // from.
  return ssl::error::unexpected_result;
}

ErrorCode Core::EndOfStream() const {
  return (SSL_get_shutdown(ssl_) & SSL_RECEIVED_SHUTDOWN) != 0
             ? ErrorCode(asio::error::eof)
             : ErrorCode(ssl::error::stream_truncated);
}

Need Core::Perform(OpState& op, ErrorCode& ec) {
  exhausted_ = false;
  // Output an earlier step left unsent stays in front of this one's (the
  // BIO appends) and leaves with it: one send for both.
  if (!op.called) {
    ERR_clear_error();
    std::size_t n = 0;
    int result = 1;
    switch (op.step) {
      case Step::kHandshake:
        result = SSL_do_handshake(ssl_);
        break;
      case Step::kRead:
        if (op.size != 0) result = SSL_read_ex(ssl_, op.data, op.size, &n);
        break;
      case Step::kWrite:
        if (op.size != 0) result = SSL_write_ex(ssl_, op.data, op.size, &n);
        break;
      case Step::kShutdown:
        // 0: sent, the peer's not received, which is not waited for.
        result = SSL_shutdown(ssl_) >= 0 ? 1 : -1;
        break;
    }
    if (result <= 0) return Failed(op, result, ec);
    op.called = true;
    op.done = n;
    // A gathered write's copy is given back once encrypted, as the output
    // is once sent.
    if (op.step == Step::kWrite) std::string().swap(gather_);
  }
  if (op.step == Step::kRead) {
    SendWhatFits();
    return Need::kDone;
  }
  // Even with nothing left to send: a read's failed send may have dropped
  // this step's records, and the failure is then this step's.
  if (!Flush(ec)) return ec ? Need::kDone : Need::kWritable;
  return Need::kDone;
}

Need Core::Failed(const OpState& op, int result, ErrorCode& ec) {
  const int error = SSL_get_error(ssl_, result);
  if (error != SSL_ERROR_WANT_READ) {
    ec = Failure(error);
    // An alert the failure produced goes if the socket takes it now.
    SendWhatFits();
    return Need::kDone;
  }
  if (eof_) {
    ec = EndOfStream();
    return Need::kDone;
  }
  if (op.step == Step::kRead) {
    // What this read made (a KeyUpdate answer) goes if the socket takes
    // it; else with the next write. A read never waits to send: a blocked
    // write's records may fill the socket.
    SendWhatFits();
    return Need::kReadable;
  }
  // A handshake's flight goes out before it waits for the answer.
  if (unsent() != 0 && !Flush(ec)) return ec ? Need::kDone : Need::kWritable;
  return Need::kReadable;
}

void Core::SendWhatFits() {
  ErrorCode ignored;  // a write reports it
  if (unsent() != 0) Flush(ignored);
}

PerformResult PerformStep(OpState& op, Need direction, ErrorCode& ec, std::size_t& bytes) {
  Core& core = *op.core;
  ec = {};
  bytes = 0;
  op.need = core.Perform(op, ec);
  if (op.need == direction) return PerformResult::kNotDone;  // the reactor waits
  // Done, or waiting the other way (the operation's handler starts that).
  bytes = op.done;
  if (op.need == Need::kDone && direction == Need::kReadable && core.exhausted() &&
      SSL_has_pending(core.ssl()) == 0) {
    return PerformResult::kDoneExhausted;
  }
  return PerformResult::kDone;
}

}  // namespace tollgate::gateway::tls_detail
