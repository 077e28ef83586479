#pragma once

// Part 04d's cluster and checks: the learner's replicas (an actor built
// with (world, rank, group), with `step(k)`, `save(path, next_step)`,
// `load(path)` and `weights()`) and the learner's driver `train`, which
// must survive a node's death by starting new replicas from the last
// checkpoint. A run with node-2 killed must end with the weights of a run
// nobody killed, to the bit, having repeated at most the steps since the
// last checkpoint.

#include "replicas.hpp"

#include <unistd.h>

#include <filesystem>

#include <lumen/ml/safetensors.hpp>

namespace scratch04 {

constexpr int resume_steps = 30, checkpoint_every = 5;

/// A run's replicas, attempt after attempt: each attempt a new group
/// ("ddp-0", "ddp-1", ...) of three replicas on the first three of node-1
/// to node-4 that the cluster does not know to be down; and the
/// checkpoint's path, on storage every node reaches.
template <class Replica>
class replica_cluster {
public:
  explicit replica_cluster(std::string checkpoint)
    : checkpoint_(std::move(checkpoint)) {}

  /// Three new replicas, ranks 0-2 of a new group.
  std::vector<lumen::ActorHandle<Replica>> start() {
    std::vector<std::string> nodes;
    for (int n = 1; n <= world + 1 && nodes.size() < size_t(world); ++n) {
      auto id = "node-" + std::to_string(n);
      if (!lumen::sim::known_down(id))
        nodes.push_back(id);
    }
    auto group = "ddp-" + std::to_string(attempts_++);
    return start_replicas<Replica>(nodes, group);
  }

  const std::string& checkpoint() const {
    return checkpoint_;
  }

  /// How many times start() was called.
  int attempts() const {
    return attempts_;
  }

private:
  std::string checkpoint_;
  int attempts_ = 0;
};

template <class Replica>
using train_fn = std::vector<float> (*)(replica_cluster<Replica>&, int);

/// One run of the learner's driver under `seed`, node-2 killed at
/// `kill_at` unless it is zero: rank 0's final weights, the steps rank 0
/// began, the attempts, and "" or what went wrong.
struct resume_run {
  std::vector<float> weights;
  int begun = 0, attempts = 0;
  std::string wrong;
};

template <class Replica>
resume_run run_resume(uint64_t seed, train_fn<Replica> train,
                      std::chrono::milliseconds kill_at,
                      step_mode mode = step_mode::none) {
  auto dir = std::filesystem::temp_directory_path() /
             ("lumen-ml_scratch04d-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto file = dir / "checkpoint.safetensors";
  std::filesystem::remove(file); // an earlier run's is not this one's
  resume_run out;
  steps_begun() = 0;
  out.wrong =
    exercise::in_simulation(replica_network(seed), [&]() -> std::string {
      replica_cluster<Replica> cluster{file.string()};
      exercise::step_events(mode, [](const lumen::sim::event&, bool json) {
        auto s = std::to_string(steps_begun());
        return json ? "\"steps_begun\": " + s : "(rank 0's steps: " + s + ")";
      });
      if (kill_at.count() > 0)
        lumen::sim::kill_node("node-2", kill_at);
      out.weights = train(cluster, resume_steps);
      out.attempts = cluster.attempts();
      return "";
    });
  out.begun = steps_begun();
  std::filesystem::remove_all(dir);
  return out;
}

/// The learner's driver under `seed`, calm and with node-2 killed; a line
/// of the table, and "" or what is wrong.
template <class Replica>
std::string check_resume(uint64_t seed, train_fn<Replica> train) {
  auto calm = run_resume<Replica>(seed, train, std::chrono::milliseconds(0));
  if (!calm.wrong.empty())
    return "with no node killed: " + calm.wrong;
  auto kill_at = std::chrono::milliseconds(250 + 100 * seed);
  auto hit = run_resume<Replica>(seed, train, kill_at);
  std::printf("  seed %llu: node-2 killed at %lld ms: %d attempts, %d steps "
              "begun for %d\n",
              static_cast<unsigned long long>(seed),
              static_cast<long long>(kill_at.count()), hit.attempts, hit.begun,
              resume_steps);
  auto at = "node-2 killed at " + std::to_string(kill_at.count()) + " ms: ";
  if (!hit.wrong.empty())
    return at + hit.wrong +
           ". A step that fails must start new replicas "
           "(cluster.start()) and go on (see TODO(ml_scratch04d) in train)";
  if (hit.begun > resume_steps + checkpoint_every)
    return at + "rank 0 began " + std::to_string(hit.begun) +
           " steps to finish " + std::to_string(resume_steps) +
           ": the new replicas went back further than the last checkpoint. "
           "Have rank 0 save one after every " +
           std::to_string(checkpoint_every) +
           "th step and the new replicas load it (see TODO(ml_scratch04d) "
           "in train)";
  auto gap = largest_difference(hit.weights, calm.weights);
  if (hit.weights.size() != calm.weights.size() || gap != 0)
    return at +
           "rank 0's final weights differ from a run nobody killed by "
           "up to " +
           std::to_string(gap) +
           ": a checkpoint must hold all that the next step depends on: the "
           "weights, the optimizer's velocity and the step to go on from "
           "(see TODO(ml_scratch04d) in save and load)";
  return "";
}

/// The part's program: --check (three seeds), or --step (the run with
/// node-2 killed, event by event).
template <class Replica>
int main_resume(int argc, char** argv, train_fn<Replica> train) {
  auto f = exercise::parse_flags(argc, argv);
  if (!f)
    return 2;
  if (f->step != step_mode::none) {
    auto hit =
      run_resume<Replica>(1, train, std::chrono::milliseconds(350), f->step);
    if (!hit.wrong.empty())
      std::cout << hit.wrong << "\n";
    return hit.wrong.empty() ? 0 : 1;
  }
  exercise::checker cases;
  exercise::under_each_seed(
    cases, "30 steps, node-2 killed mid-run, resumed from a checkpoint",
    [&](uint64_t seed) { return check_resume<Replica>(seed, train); });
  return cases.verdict();
}

} // namespace scratch04
