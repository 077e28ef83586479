// The Fashion-MNIST train loop of `lumen train fashion-mnist`: every
// worker trains a replica on its share of the training set, the mean
// gradient all-reduced bucket by bucket while backward runs; the test set
// is evaluated in shares too, and rank 0 reports each epoch with a
// checkpoint that a restart, or --resume, goes on from to the bit.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <future>
#include <optional>
#include <sstream>

#include "lumen/collective/collective.hpp"
#include "lumen/ml/batch_stream.hpp"
#include "lumen/ml/data.hpp"
#include "lumen/ml/model_file.hpp"
#include "lumen/ml/optimizer.hpp"
#include "lumen/train/data_parallel.hpp"
#include "lumen/train/fashion_mnist.hpp"

#include "train/loop_checks.hpp"
#include "train/server_sync.hpp"

namespace lumen::train {

namespace {

using clock_type = std::chrono::steady_clock;

/// The first `limit` rows of `d` (all for 0), viewed in place.
ml::dataset first_rows(const ml::dataset& d, size_t limit) {
  if (limit == 0 || limit >= d.size())
    return d;
  return {d.features.rows(0, limit), d.labels.rows(0, limit)};
}

void loop(const loop_config& cfg) {
  auto& ctx = get_context();
  auto rank = size_t(ctx.world_rank), world = size_t(ctx.world_size);
  auto dir = text_or(cfg, "data", ml::fashion_mnist_dir);
  // The test split is read beside the training split: on the other core,
  // or while another process of this machine makes that one.
  auto test_split = std::async(std::launch::async, [dir] {
    return ml::node_fashion_mnist(ml::split::test, fashion_mnist_mean,
                                  fashion_mnist_std, dir);
  });
  auto all =
    first_rows(ml::node_fashion_mnist(ml::split::train, fashion_mnist_mean,
                                      fashion_mnist_std, dir),
               size_t(value_or(cfg, "limit", 0)));
  auto batch = size_t(value_or(cfg, "batch", fashion_mnist_defaults::batch));
  // A run on other than its planned workers (elastic: after a loss, or
  // before nodes joined) keeps the planned global batch, each worker
  // taking its share to the nearest row, so that the steps per epoch and
  // the learning rate stay as planned; the rate follows what rounding
  // leaves of the global batch (the linear scaling rule).
  auto planned = size_t(value_or(cfg, "planned_workers", double(world)));
  auto global = batch * planned;
  batch = std::max<size_t>(1, (global + world / 2) / world);
  auto lr_ratio = double(batch * world) / double(global);
  // Every rank takes as many rows as the smallest share (at most world-1
  // rows fewer than the largest), so that all make as many batches and
  // their all-reduces pair up.
  auto each = all.size() / world;
  if (batch == 0 || each < batch)
    throw usage_error(std::to_string(all.size()) + " training rows for " +
                      std::to_string(world) + " workers of batch " +
                      std::to_string(batch) +
                      ": not one batch each; use more rows or fewer workers");
  auto share = ml::share_of(all, rank, world);
  ml::dataset mine{share.features.rows(0, each), share.labels.rows(0, each)};
  auto test = ml::share_of(
    first_rows(test_split.get(), size_t(value_or(cfg, "test_limit", 0))), rank,
    world);
  auto spec = fashion_mnist_model(text_or(cfg, "model", "mlp"),
                                  text_or(cfg, "hidden", "256,128"));
  auto net_ptr = ml::make_model(spec);
  auto& net = *net_ptr;
  auto seed = uint64_t(value_or(cfg, "seed", 1));
  auto w = net.init(ml::derive_seed(seed, 0));
  auto lr = float(value_or(cfg, "lr", fashion_mnist_defaults::lr) * lr_ratio);
  ml::optimizer_config rule{ml::optimizer_kind::momentum, lr};
  rule.weight_decay =
    float(value_or(cfg, "weight_decay", fashion_mnist_defaults::weight_decay));
  ml::optimizer opt{rule, w.size()};
  auto epochs = size_t(value_or(cfg, "epochs", fashion_mnist_defaults::epochs));
  size_t first = 0;
  if (auto& from = get_checkpoint()) {
    auto file =
      ml::parse_model_file(from->files.at(model_file_name),
                           "the checkpoint's " + std::string{model_file_name});
    check_same_model(file.spec, spec);
    w = std::move(file.params);
    auto v = file.extra.find("optimizer.velocity");
    if (v != file.extra.end() && v->second.numel() == w.size())
      *opt.state()[0] = v->second.to_vector<float>();
    first = std::stoul(file.metadata.at("epochs_done"));
  }
  bucket_config buckets;
  buckets.overlap = value_or(cfg, "overlap", 1) != 0;
  bucketed_allreduce sync{net, ctx.group, buckets};
  // --sync ps: the mean gradient through a server on rank 0 instead.
  std::optional<detail::server_sync> server;
  if (text_or(cfg, "sync", "ring") == "ps" && world > 1)
    server.emplace(ctx.group, rank, world, w.size());
  // Each epoch's order depends on the seed and the epoch alone (the
  // stream shuffles by seed + epoch), so a resumed run sees the batches
  // the uninterrupted one would have.
  ml::batch_stream batches{mine, batch, ml::derive_seed(seed, 1 + rank) + first,
                           true};
  auto steps = batches.batches_per_epoch();
  std::vector<float> grad(w.size());
  // The first step reports at once: the driver sees training start.
  auto since = clock_type::time_point{};
  for (auto epoch = first; epoch < epochs; ++epoch) {
    auto start = clock_type::now();
    double loss = 0, exposed = 0;
    for (size_t s = 0; s < steps; ++s) {
      auto t = double(epoch * steps + s) / double(epochs * steps);
      auto lr_scale = float(0.5 * (1 + std::cos(M_PI * t)));
      auto where = "epoch " + std::to_string(epoch + 1) + ", step " +
                   std::to_string(s + 1) + " of " + std::to_string(steps);
      float step_loss = 0;
      if (server) {
        // This rank's loss, as the ring's reports it; the server checks
        // the mean.
        step_loss =
          net.loss_and_gradient(w.data(), batches.next().data, grad.data());
        server->step(w, grad, step_loss, opt, lr_scale, where);
        exposed += server->exposed();
      } else {
        step_loss = sync.loss_and_mean_gradient(w.data(), batches.next().data,
                                                grad.data());
        detail::stop_if_diverged(step_loss, grad, where);
        opt.step(w.data(), grad.data(), grad.size(), lr_scale);
        exposed += sync.last_step().exposed();
      }
      loss += step_loss;
      auto now = clock_type::now();
      if (rank == 0 && now - since > std::chrono::milliseconds(200)) {
        since = now;
        std::chrono::duration<double> took = now - start;
        report_progress(
          {{"epoch", double(epoch + 1)},
           {"epochs", double(epochs)},
           {"step", double(s + 1)},
           {"steps", double(steps)},
           {"loss", loss / double(s + 1)},
           {"samples_per_second",
            double(std::min((s + 1) * batch, each) * world) / took.count()}});
      }
    }
    std::chrono::duration<double> took = clock_type::now() - start;
    // The test set in shares: each rank its part, the sums all-reduced.
    std::vector<float> sums{net.accuracy(w.data(), test) * float(test.size()),
                            net.loss(w.data(), test) * float(test.size()),
                            float(test.size())};
    collective::allreduce(sums, ctx.group);
    std::optional<checkpoint> c;
    if (rank == 0) {
      ml::model_file file{spec, w, {}, {}};
      file.extra["optimizer.velocity"] = ml::tensor::from(*opt.state()[0]);
      file.metadata = {
        {"dataset", "fashion-mnist"},
        {"input", "28x28 pixels, row by row, as 784 floats"},
        {"input_normalisation", "x = (pixel / 255 - input_mean) / input_std"},
        {"input_mean", detail::number_text(fashion_mnist_mean)},
        {"input_std", detail::number_text(fashion_mnist_std)},
        {"epochs_done", std::to_string(epoch + 1)},
        {"epochs", std::to_string(epochs)},
        {"lr", detail::number_text(lr)},
        {"weight_decay", detail::number_text(rule.weight_decay)},
        {"batch", std::to_string(batch)},
        {"workers", std::to_string(world)},
        {"seed", std::to_string(seed)}};
      std::string names;
      for (auto& n : ml::fashion_mnist_classes())
        names += (names.empty() ? "" : ",") + n;
      file.metadata["classes"] = names;
      c.emplace();
      c->files[model_file_name] = ml::model_file_bytes(file);
    }
    report({{"epoch", double(epoch + 1)},
            {"loss", loss / double(steps)},
            {"test_loss", sums[1] / sums[2]},
            {"test_accuracy", sums[0] / sums[2]},
            {"epoch_seconds", took.count()},
            {"samples_per_second", double(each * world) / took.count()},
            {"exposed_allreduce_seconds", exposed},
            {"drift", drift(w, ctx.group)}},
           c);
  }
}

} // namespace

ml::model_spec fashion_mnist_model(const std::string& model,
                                   const std::string& hidden) {
  if (model == "mlp")
    return {"mlp", 784, detail::hidden_widths(hidden), 10};
  auto spec =
    ml::sequential_spec(model == "cnn" ? fashion_mnist_cnn : model, 1, 28, 28);
  if (spec.classes != 10)
    throw usage_error("the model \"" + model + "\" ends in " +
                      std::to_string(spec.classes) +
                      " outputs where Fashion-MNIST has 10 classes; end it "
                      "with linear(10)");
  return spec;
}

void check_same_model(const ml::model_spec& theirs,
                      const ml::model_spec& ours) {
  if (theirs != ours)
    throw usage_error("the checkpoint's model is " +
                      ml::make_model(theirs)->name() + ", this run's " +
                      ml::make_model(ours)->name() +
                      "; give the --model (and --hidden) it was trained with");
}

namespace detail {

std::vector<uint64_t> hidden_widths(const std::string& text) {
  std::vector<uint64_t> out;
  std::stringstream in{text};
  for (std::string part; std::getline(in, part, ',');) {
    size_t used = 0;
    unsigned long long w = 0;
    try {
      w = std::stoull(part, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != part.size() || w == 0 || w > 65536)
      throw usage_error("hidden layer widths \"" + text +
                        "\": give positive numbers up to 65536 separated by "
                        "commas, e.g. 256,128");
    out.push_back(w);
  }
  if (out.empty())
    throw usage_error("hidden layer widths \"" + text +
                      "\": give at least one, e.g. 256,128");
  return out;
}

bool fashion_mnist_registered() {
  static const bool done = register_train_loop(fashion_mnist_loop, loop);
  return done;
}

} // namespace detail

} // namespace lumen::train
