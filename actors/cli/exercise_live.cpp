#include "exercise_live.hpp"

#include <deque>
#include <thread>
#include <vector>

#include <boost/asio.hpp>

#include "lumen/errors.hpp"

#include "exercise_live_page.hpp"

namespace lumen::cli {

namespace asio = boost::asio;
using asio::ip::tcp;

namespace {

/// A request larger than this is not a browser's GET: it is dropped.
constexpr size_t max_request = 16 * 1024;

/// One connection: its request read, then the page sent, or events
/// written as they come, one write at a time.
class client : public std::enable_shared_from_this<client> {
public:
  explicit client(tcp::socket s)
    : socket_(std::move(s)) {}

  template <class OnRequest>
  void read_request(OnRequest on_request) {
    auto self = shared_from_this();
    asio::async_read_until(
      socket_, request_, "\r\n\r\n",
      [self, on_request](boost::system::error_code ec, size_t) {
        if (ec)
          return; // closed, or more than max_request: dropped
        std::istream in{&self->request_};
        std::string method, path;
        in >> method >> path;
        on_request(self, method, path);
      });
  }

  /// Queues `bytes`; with `last`, the connection closes after them.
  void send(std::string bytes, bool last = false) {
    if (closed_)
      return;
    queue_.push_back(std::move(bytes));
    close_after_ = close_after_ || last;
    if (queue_.size() == 1)
      write_next();
  }

  bool closed() const {
    return closed_;
  }

private:
  void write_next() {
    auto self = shared_from_this();
    asio::async_write(socket_, asio::buffer(queue_.front()),
                      [self](boost::system::error_code ec, size_t) {
                        self->queue_.pop_front();
                        if (ec) {
                          self->close();
                          return;
                        }
                        if (!self->queue_.empty())
                          self->write_next();
                        else if (self->close_after_)
                          self->close();
                      });
  }

  void close() {
    closed_ = true;
    queue_.clear();
    boost::system::error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);
  }

  tcp::socket socket_;
  asio::streambuf request_{max_request};
  std::deque<std::string> queue_;
  bool close_after_ = false;
  bool closed_ = false;
};

std::string response(const std::string& status, const std::string& type,
                     const std::string& body) {
  return "HTTP/1.1 " + status + "\r\nContent-Type: " + type +
         "\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n" + body;
}

/// An event as the stream carries it; `data` is one line.
std::string frame(const std::string& name, const std::string& data) {
  return "event: " + name + "\ndata: " + data + "\n\n";
}

} // namespace

struct live_page::impl : std::enable_shared_from_this<impl> {
  asio::io_context io;
  tcp::acceptor acceptor{io};
  std::thread thread;
  // Only the io thread touches these.
  std::vector<std::shared_ptr<client>> listeners;
  std::vector<std::string> this_run; // the frames since the last "run"

  void accept() {
    acceptor.async_accept(
      [self = shared_from_this()](boost::system::error_code ec, tcp::socket s) {
        if (ec)
          return; // the acceptor closed: the page is going away
        auto c = std::make_shared<client>(std::move(s));
        c->read_request(
          [self](const std::shared_ptr<client>& c, const std::string& method,
                 const std::string& path) { self->answer(c, method, path); });
        self->accept();
      });
  }

  void answer(const std::shared_ptr<client>& c, const std::string& method,
              const std::string& path) {
    if (method != "GET") {
      c->send(response("405 Method Not Allowed", "text/plain",
                       "only GET is served here\n"),
              true);
      return;
    }
    if (path == "/" || path == "/index.html") {
      c->send(response("200 OK", "text/html; charset=utf-8", live_page_html),
              true);
      return;
    }
    if (path == "/events") {
      c->send("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
              "Cache-Control: no-store\r\nConnection: keep-alive\r\n\r\n");
      for (auto& f : this_run)
        c->send(f);
      listeners.push_back(c);
      return;
    }
    c->send(response("404 Not Found", "text/plain",
                     "the live page is at / and its events at /events\n"),
            true);
  }

  void publish(const std::string& f, bool new_run) {
    if (new_run)
      this_run.clear();
    this_run.push_back(f);
    std::vector<std::shared_ptr<client>> open;
    for (auto& c : listeners)
      if (!c->closed()) {
        c->send(f);
        open.push_back(c);
      }
    listeners = std::move(open);
  }
};

live_page::live_page(uint16_t port)
  : impl_(std::make_shared<impl>()) {
  boost::system::error_code ec;
  tcp::endpoint at{asio::ip::make_address("127.0.0.1"), port};
  impl_->acceptor.open(at.protocol(), ec);
  if (!ec)
    impl_->acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec)
    impl_->acceptor.bind(at, ec);
  if (!ec)
    impl_->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec)
    throw usage_error(
      "the live page cannot listen on 127.0.0.1:" + std::to_string(port) +
      " (" + ec.message() + "); give another --port, or 0 for any free one");
  impl_->accept();
  impl_->thread = std::thread{[i = impl_] { i->io.run(); }};
}

live_page::~live_page() {
  asio::post(impl_->io, [i = impl_] {
    boost::system::error_code ignored;
    i->acceptor.close(ignored);
    i->io.stop();
  });
  impl_->thread.join();
}

std::string live_page::url() const {
  return "http://127.0.0.1:" +
         std::to_string(impl_->acceptor.local_endpoint().port()) + "/";
}

void live_page::publish(const std::string& name, const std::string& data) {
  asio::post(impl_->io, [i = impl_, f = frame(name, data),
                         run = name == "run"] { i->publish(f, run); });
}

} // namespace lumen::cli
