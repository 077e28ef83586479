#include "train/train_flags.hpp"

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <functional>

namespace lumen::train::detail {

namespace {

/// A flag's value checked by `bad`, which says what is wrong ("" if
/// nothing is).
CLI::Validator checked(const char* name,
                       std::function<std::string(const std::string&)> bad) {
  return CLI::Validator{[bad](std::string& value) { return bad(value); }, "",
                        name};
}

const CLI::Validator not_empty = checked("NOT_EMPTY", [](auto& v) {
  return v.empty() ? std::string{"is empty; give a value or leave the flag out"}
                   : std::string{};
});

/// NaN passes CLI::Range (every comparison with it is false).
const CLI::Validator finite = checked("FINITE", [](auto& v) {
  char* end = nullptr;
  auto x = std::strtod(v.c_str(), &end);
  return std::isfinite(x) ? std::string{}
                          : "'" + v + "' is not a finite number";
});

/// A run's name is one folder under --storage, never a path out of it.
const CLI::Validator plain_name = checked("NAME", [](auto& v) {
  bool ok = !v.empty() && v[0] != '.';
  for (char c : v)
    ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '-' ||
                c == '_' || c == '.');
  return ok ? std::string{}
            : "'" + v +
                "' is no run name: use letters, digits and .-_ (not "
                "starting with a dot); the run goes under --storage";
});

const CLI::Validator widths = checked("W,W,...", [](auto& v) {
  try {
    static_cast<void>(detail::hidden_widths(v));
    return std::string{};
  } catch (const usage_error& e) {
    return std::string{e.what()};
  }
});

const CLI::Validator model_name = checked("MODEL", [](auto& v) {
  try {
    static_cast<void>(fashion_mnist_model(v, "1"));
    return std::string{};
  } catch (const usage_error& e) {
    return std::string{e.what()};
  }
});

} // namespace

void add_flags(CLI::App& app, train_flags& f) {
  app.add_option("--workers", f.workers, "workers, a process each")
    ->check(CLI::Range(1, 64))
    ->capture_default_str();
  app
    .add_option("--min-workers", f.min_workers,
                "go on with fewer workers, down to this many, after one is "
                "lost (default: as many as --workers)")
    ->check(CLI::Range(1, 64));
  app
    .add_option("--max-workers", f.max_workers,
                "grow to this many workers as nodes join the cluster, each "
                "at the next epoch's checkpoint; the global batch (--batch "
                "x --max-workers) stays (needs --min-workers; default: as "
                "many as --workers)")
    ->check(CLI::Range(1, 64));
  app.add_option("--epochs", f.epochs, "passes over the training set in all")
    ->check(CLI::Range(1, 1000))
    ->capture_default_str();
  app
    .add_option("--lr", f.lr,
                "learning rate of momentum SGD (0.9), decayed to 0 on a "
                "cosine")
    ->check(finite & CLI::Range(1e-6, 10.0))
    ->capture_default_str();
  app.add_option("--weight-decay", f.weight_decay, "L2 penalty on the weights")
    ->check(finite & CLI::Range(0.0, 1.0))
    ->capture_default_str();
  app.add_option("--batch", f.batch, "rows per step and worker")
    ->check(CLI::Range(1, 65536))
    ->capture_default_str();
  app.add_option("--seed", f.seed, "seeds the weights and the shuffles")
    ->check(CLI::NonNegativeNumber)
    ->capture_default_str();
  app
    .add_option("--model", f.model,
                "mlp, cnn (" + std::string{fashion_mnist_cnn} +
                  ") or layers of your own: linear(N), conv(C,K[,P]), "
                  "pool(K), relu, gelu, flatten joined by '-', ending in "
                  "linear(10)")
    ->check(model_name)
    ->type_name("MODEL")
    ->capture_default_str();
  app
    .add_option("--sync", f.sync,
                "how the workers' gradients meet: ring (all-reduce, bucket "
                "by bucket during backward) or ps (a parameter server on "
                "rank 0 averages them and sends back the weights)")
    ->check(CLI::IsMember({"ring", "ps"}))
    ->capture_default_str();
  app.add_option("--hidden", f.hidden, "the MLP's hidden layer widths")
    ->check(widths)
    ->type_name("W,W,...")
    ->capture_default_str();
  app
    .add_option("--limit", f.limit,
                "train on the first N images only (0: all 60,000)")
    ->check(CLI::NonNegativeNumber)
    ->type_name("N");
  app
    .add_option("--test-limit", f.test_limit,
                "test on the first N images only (0: all 10,000)")
    ->check(CLI::NonNegativeNumber)
    ->type_name("N");
  app.add_option("--data", f.data, "the data set's folder")
    ->check(not_empty)
    ->type_name("DIR")
    ->capture_default_str();
  app
    .add_option("--storage", f.storage,
                "where runs go (default ~/lumen_results): checkpoints, "
                "metrics.csv, result.json, metrics.svg under STORAGE/NAME")
    ->check(not_empty)
    ->type_name("DIR");
  app.add_option("--name", f.name, "the run's name")
    ->check(plain_name)
    ->capture_default_str();
  app
    .add_option("--resume", f.resume,
                "go on from a checkpoint: its folder or model.safetensors; "
                "--resume=latest takes the run's last one")
    ->check(not_empty)
    ->type_name("PATH")
    ->expected(0, 1)
    ->default_str("latest");
  app
    .add_option("--max-failures", f.max_failures,
                "restarts from the last checkpoint when a worker dies")
    ->check(CLI::Range(0, 100))
    ->capture_default_str();
  app
    .add_option("--progress", f.progress,
                "a redrawn bar, or a line per epoch (auto: a bar on a "
                "terminal)")
    ->check(CLI::IsMember({"auto", "bar", "lines"}))
    ->capture_default_str();
}
} // namespace lumen::train::detail
