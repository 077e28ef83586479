#include "cluster/cluster_client.hpp"

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include "lumen/detail/arguments.hpp"
#include "lumen/errors.hpp"

#include "transport/protocol.hpp"

namespace lumen::detail {

cluster_client::cluster_client(process_services& rt, const address& head,
                               credentials creds, const std::string& role)
  : sys_(rt.system())
  , head_(rt, head, creds, role)
  , endpoints_(rt, head_)
  , directory_(sys_, head_)
  , links_(rt, std::move(creds), head_, directory_, role == "client",
           [this](std::string node, std::string why,
                  std::shared_ptr<data_client> data) {
             bury(std::move(node), std::move(why), std::move(data));
           })
  , actors_(rt, links_, directory_, stopping_) {
  undertaker_ = std::thread{[this] { run_funerals(); }};
}

void cluster_client::watch_head(
  std::function<void(const caf::actor& head)> on_head_back) {
  head_.watch(std::move(on_head_back));
}

std::vector<node_info> cluster_client::nodes() {
  return directory_.fetch();
}

void cluster_client::stop() {
  stopping_ = true;
  {
    std::lock_guard<std::mutex> guard{funeral_mtx_};
    funeral_cv_.notify_all();
  }
  head_.stop();
  if (undertaker_.joinable())
    undertaker_.join();
}

cluster_client::~cluster_client() {
  stop();
  // After this, no reader thread runs a callback into this object.
  links_.close_all();
}

void cluster_client::bury(std::string node_id, std::string why,
                          std::shared_ptr<data_client> data) {
  std::lock_guard<std::mutex> guard{funeral_mtx_};
  funerals_.push_back({std::move(node_id), std::move(why), std::move(data)});
  funeral_cv_.notify_one();
}

void cluster_client::run_funerals() {
  for (;;) {
    funeral f;
    {
      std::unique_lock<std::mutex> guard{funeral_mtx_};
      bool woken =
        funeral_cv_.wait_for(guard, data_links_checked_every, [this] {
          return stopping_ || !funerals_.empty();
        });
      if (stopping_)
        return;
      if (!woken) {
        guard.unlock();
        lose_dead_data_links();
        continue;
      }
      f = std::move(funerals_.front());
      funerals_.pop_front();
    }
    if (f.data)
      f.data->fail_all("node " + f.node + " went down (" + f.why + ")");
    actors_.rescue(f.node, f.why);
  }
}

void cluster_client::lose_dead_data_links() {
  auto linked = links_.data_only();
  if (linked.empty())
    return;
  std::vector<node_info> known;
  try {
    known = directory_.fetch();
  } catch (const error&) {
    return; // the head's loss is head_link's to handle
  }
  for (auto& n : known)
    if (!n.alive && linked.count(n.id) > 0)
      links_.lose(n.id, nullptr, "the head found it dead");
}

void cluster_client::on_down(const caf::down_msg& msg) {
  // The head serves work too: its death also fails what is pending there.
  head_.on_down(msg);
  auto node = links_.node_of(msg.source);
  if (!node.empty())
    links_.lose(node, nullptr, sys_.render(msg.reason));
}

void cluster_client::submit_task(std::shared_ptr<task_spec> t) {
  // An infeasible request is refused at once, not when its arguments are
  // in; other placement trouble (a node gone) fails its ref later.
  if (!t->resources.empty()) {
    try {
      directory_.pick(t->where, t->resources);
    } catch (const usage_error& e) {
      if (e.code() == errc::infeasible)
        throw;
    } catch (const error&) {
    }
  }
  auto deps = t->deps;
  when_all_ready(deps, [this, t] { send_task(t, t->max_retries()); });
}

void cluster_client::send_task(std::shared_ptr<task_spec> t, int retries_left) {
  if (t->cancel_requested())
    return; // its result failed when it was cancelled
  if (auto err = first_error(t->deps)) {
    t->result()->set_error(err);
    return;
  }
  std::string node;
  std::shared_ptr<data_client> link;
  bytes args, resources;
  try {
    args = t->encode_args();
    if (!t->resources.empty())
      resources = encode(t->resources);
  } catch (...) {
    t->result()->set_error(std::current_exception());
    return;
  }
  for (;;) {
    try {
      node = directory_.pick(t->where, t->resources);
      link = links_.for_work(node);
      break;
    } catch (...) {
      // A spread task tries another node when one cannot be reached.
      if (node.empty() || t->where.kind != placement::spread ||
          retries_left == 0 || stopping_) {
        t->result()->set_error(std::current_exception());
        return;
      }
      links_.lose(node, nullptr, "it cannot be reached");
      --retries_left;
      node.clear();
    }
  }
  auto lost = [this, t, node, retries_left,
               client = link.get()](const std::string& why) {
    links_.lose(node, client, why);
    // A task that was spread may run on another node; one pinned to this
    // node cannot.
    if (retries_left > 0 && t->where.kind == placement::spread && !stopping_ &&
        !t->cancel_requested()) {
      send_task(t, retries_left - 1);
      return;
    }
    t->result()->set_error(std::make_exception_ptr(
      actor_died("task " + t->function().name + " was lost with node " + node +
                 ": " + why)));
  };
  auto id =
    link->task(t->function().name, resources, args, publish_reply(t), lost);
  if (id == 0)
    lost("the connection to node " + node + " is gone");
  else
    t->forward_cancel(cancel_on(link, id));
}

caf::actor cluster_client::manager_of(const std::string& node_id) {
  return links_.get(directory_.pick({placement::node, node_id})).manager;
}

std::shared_ptr<data_client>
cluster_client::typed_route(const caf::node_id& nid) {
  if (auto data = links_.linked(nid))
    return data;
  {
    std::lock_guard<std::mutex> guard{unroutable_mtx_};
    if (unroutable_.count(nid) > 0)
      return nullptr;
  }
  // A handle that came from elsewhere (a message, a reply): the head knows
  // which node's process it lives in. Only the data plane is connected:
  // the typed actors' requests need nothing else, and every node sending
  // to every other at the start of a step would otherwise open CAF links
  // to each other at once (node_links::data).
  std::optional<std::string> node;
  try {
    node = head_.ask_for_string(process_node_atom::value, nid);
  } catch (const error&) {
    return nullptr; // the head is out of reach: CAF's path remains
  }
  if (!node) {
    std::lock_guard<std::mutex> guard{unroutable_mtx_};
    unroutable_.insert(nid); // a driver's, or an outside process's
    return nullptr;
  }
  try {
    return links_.data(*node, nid);
  } catch (const error&) {
    return nullptr; // its death is the failure detector's news
  }
}

std::vector<std::pair<std::string, std::shared_ptr<data_client>>>
cluster_client::node_connections() {
  std::vector<std::pair<std::string, std::shared_ptr<data_client>>> out;
  for (auto& n : nodes()) {
    if (!n.alive || n.id == this_node())
      continue;
    try {
      out.emplace_back(n.id, links_.get(n.id).data);
    } catch (const error&) {
      // Its death is the failure detector's news, not this caller's.
    }
  }
  return out;
}

std::shared_ptr<actor_core> cluster_client::lookup(const std::string& name) {
  bool found = false;
  std::string cls_name, node;
  caf::actor handle;
  head_.ask(
    [&](bool f, std::string& c, std::string& n, caf::actor& h) {
      found = f;
      cls_name = std::move(c);
      node = std::move(n);
      handle = std::move(h);
    },
    lookup_atom::value, name);
  if (!found)
    return nullptr;
  auto cls = find_actor_class(cls_name);
  if (cls == nullptr)
    throw usage_error("the actor named '" + name + "' is a " + cls_name +
                      ", which this program does not register with "
                      "LUMEN_ACTOR");
  actor_options opts;
  opts.name = name;
  auto core = std::make_shared<actor_core>(*cls, nullptr, opts);
  core->borrowed = true;
  directory_.learn_of(node);
  actors_.place(core, node, std::move(handle));
  return core;
}

kv_store::put_result cluster_client::kv_put(const std::string& key,
                                            const std::string& value,
                                            bool overwrite) {
  kv_store::put_result result;
  head_.ask(
    [&](bool stored, std::string& refusal) {
      result = {stored, std::move(refusal)};
    },
    kv_put_atom::value, key, value, overwrite);
  return result;
}

std::optional<std::string> cluster_client::kv_get(const std::string& key) {
  return head_.ask_for_string(kv_get_atom::value, key);
}

std::vector<std::string> cluster_client::kv_keys(const std::string& prefix) {
  return unpack_keys(
    head_.ask_for_string(kv_keys_atom::value, prefix).value_or(""));
}

bool cluster_client::kv_erase(const std::string& key) {
  bool erased = false;
  head_.ask([&](bool ok) { erased = ok; }, kv_erase_atom::value, key);
  return erased;
}

} // namespace lumen::detail
