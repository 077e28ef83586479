#include "core/local_runtime.hpp"

// The local runtime's channel names (lumen/channel.hpp): its hub, made on
// first use, and the names' registration, which a cluster role does at the
// head.

#include "lumen/errors.hpp"

#include "security/token.hpp"

namespace lumen::detail {

void local_runtime::serve_channels(std::string host, credentials creds) {
  std::lock_guard<std::mutex> guard{channel_mtx_};
  channel_host_ = std::move(host);
  link_creds_ = std::move(creds);
}

void local_runtime::stop_channels() {
  std::unique_ptr<channel_hub> hub;
  {
    std::lock_guard<std::mutex> guard{channel_mtx_};
    hub.swap(hub_);
  }
}

std::shared_ptr<channel_listener::queue>
local_runtime::open_channel_name(const std::string& name) {
  std::shared_ptr<channel_listener::queue> q;
  std::string where;
  {
    std::lock_guard<std::mutex> guard{channel_mtx_};
    if (!hub_) {
      if (link_creds_.token.empty())
        link_creds_.token = random_token(); // channels inside this process
      hub_ = std::make_unique<channel_hub>(channel_host_, link_creds_);
    }
    q = hub_->open(name);
    where = hub_->address();
  }
  bool bound = false;
  try {
    bound = bind_endpoint(name, where);
  } catch (...) {
    close_channel_name(name);
    throw;
  }
  if (!bound) {
    std::lock_guard<std::mutex> guard{channel_mtx_};
    hub_->close(name);
    throw usage_error("another listener in the cluster has the channel name '" +
                        name + "'; pick another, or end that one first",
                      errc::name_taken);
  }
  return q;
}

void local_runtime::close_channel_name(const std::string& name) {
  {
    std::lock_guard<std::mutex> guard{channel_mtx_};
    if (!hub_)
      return;
    hub_->close(name);
  }
  drop_endpoint(name);
}

std::optional<std::string>
local_runtime::find_endpoint(const std::string& name) {
  // Outside a cluster the names are this process's hub's own.
  std::lock_guard<std::mutex> guard{channel_mtx_};
  if (!hub_ || !hub_->listening(name))
    return std::nullopt;
  return hub_->address();
}

bool local_runtime::bind_endpoint(const std::string&, const std::string&) {
  return true; // the hub refused a name it has already
}

void local_runtime::drop_endpoint(const std::string&) {}

} // namespace lumen::detail
