#include "core/process_runtime.hpp"

// A process's channel names (lumen/channel.hpp): its hub, made on first
// use, and the names' registration, which in a cluster is the cluster
// part's (at the head).

#include "lumen/errors.hpp"

#include "security/token.hpp"

namespace lumen::detail {

void process_runtime::serve_channels(std::string host, credentials creds) {
  std::lock_guard<std::mutex> guard{channel_mtx_};
  channel_host_ = std::move(host);
  link_creds_ = std::move(creds);
}

void process_runtime::stop_channels() {
  std::unique_ptr<channel_hub> hub;
  {
    std::lock_guard<std::mutex> guard{channel_mtx_};
    hub.swap(hub_);
  }
}

std::shared_ptr<channel_listener::queue>
process_runtime::open_channel_name(const std::string& name) {
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
    // Outside a cluster the hub, which refused a name it has, is all.
    bound = !cluster_ || cluster_->bind_endpoint(name, where);
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

void process_runtime::close_channel_name(const std::string& name) {
  {
    std::lock_guard<std::mutex> guard{channel_mtx_};
    if (!hub_)
      return;
    hub_->close(name);
  }
  if (cluster_)
    cluster_->drop_endpoint(name);
}

std::optional<std::string>
process_runtime::find_endpoint(const std::string& name) {
  if (cluster_)
    return cluster_->find_endpoint(name);
  std::lock_guard<std::mutex> guard{channel_mtx_};
  if (!hub_ || !hub_->listening(name))
    return std::nullopt;
  return hub_->address();
}

} // namespace lumen::detail
