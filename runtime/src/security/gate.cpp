#include "security/gate.hpp"

#include <future>
#include <thread>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>

#include "lumen/errors.hpp"

#include "security/gate_impl.hpp"

namespace lumen::detail {

using boost::system::error_code;

void gate::impl::accept() {
  acceptor.async_accept([this](error_code ec, tcp::socket s) {
    if (ec == asio::error::operation_aborted)
      return;
    if (ec) {
      // Out of descriptors, say: wait for handshakes to end and free some,
      // instead of spinning on the error.
      backoff.expires_after(std::chrono::milliseconds(10));
      backoff.async_wait([this](error_code e) {
        if (!e)
          accept();
      });
      return;
    }
    // A crowd of strangers, silent or stalled after a few bytes, makes
    // room before any peer still making progress (handshake_queue.hpp).
    if (under_way.size() >= limits.max_pending) {
      if (auto at = under_way.victim()) {
        auto n = std::to_string(under_way.size());
        if (auto h = at->it->lock())
          drop_handshake(*h, "dropped",
                         "the longest silent of " + n +
                           " handshakes under way, to make room");
        else
          under_way.remove(*at); // cannot happen: its timer holds it
      }
    }
    start_handshake(std::move(s));
    accept();
  });
}

gate::gate(const std::string& host, uint16_t port, credentials creds,
           std::string what, gate_limits limits)
  : impl_(std::make_unique<impl>()) {
  impl_->creds = std::move(creds);
  impl_->what = std::move(what);
  impl_->limits = limits;
  auto where = host + ":" + std::to_string(port);
  error_code ec;
  tcp::resolver resolver{impl_->io};
  auto found =
    resolver.resolve(host, std::to_string(port), tcp::resolver::passive, ec);
  if (ec || found.empty())
    throw usage_error("cannot listen on " + where +
                      ": the host does not resolve (" + ec.message() +
                      "); pass --host with an address of this machine, "
                      "e.g. 127.0.0.1");
  auto endpoint = found.begin()->endpoint();
  auto& acc = impl_->acceptor;
  acc.open(endpoint.protocol(), ec);
  if (!ec)
    acc.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec)
    acc.bind(endpoint, ec);
  if (!ec)
    acc.listen(asio::socket_base::max_listen_connections, ec);
  if (ec)
    throw usage_error("cannot listen on " + where + " (" + ec.message() +
                      "); pick another --port, or 0 for any free one");
  impl_->port = acc.local_endpoint(ec).port();
  impl_->ip = endpoint.address().to_string();
}

gate::~gate() {
  if (impl_->loop.joinable()) {
    impl_->io.stop();
    impl_->loop.join();
  }
}

void gate::impl::stop_accepting() {
  error_code ec;
  acceptor.close(ec);
  backoff.cancel();
  while (auto at = under_way.any()) {
    auto next = at->it->lock();
    if (!next) {
      under_way.remove(*at);
      continue;
    }
    drop_handshake(*next, "dropped", "the " + what + " gate closed");
  }
}

void gate::close() {
  if (impl_->closed)
    return;
  impl_->closed = true;
  if (!impl_->loop.joinable())
    return impl_->stop_accepting();
  std::promise<void> done;
  asio::post(impl_->io, [&] {
    impl_->stop_accepting();
    done.set_value();
  });
  done.get_future().wait();
}

uint16_t gate::port() const noexcept {
  return impl_->port;
}

const std::string& gate::ip() const noexcept {
  return impl_->ip;
}

const credentials& gate::creds() const noexcept {
  return impl_->creds;
}

void gate::open(admit_fn admit) {
  impl_->admit = std::move(admit);
  impl_->accept();
  // The loop runs until the gate is destroyed, even with nothing to do, so
  // that close() always finds it.
  auto work = asio::make_work_guard(impl_->io);
  impl_->loop = std::thread{[this, work] {
    // A handler that throws must not end the process, nor the gate.
    for (;;) {
      try {
        impl_->io.run();
        return;
      } catch (const std::exception& e) {
        log_line("the " + impl_->what + " gate recovered from: " + e.what());
      }
    }
  }};
}

} // namespace lumen::detail
