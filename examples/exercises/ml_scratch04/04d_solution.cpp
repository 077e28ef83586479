// ml_scratch04d: a checkpoint, and a resume after a node dies — the
// reference: 04d_starter.cpp with its TODOs done.

#include "resume.hpp"

namespace scratch04 {

// A replica in the group of its attempt; it can write what a resumed run
// needs and read it back.
class Replica {
public:
  Replica(int world_size, int rank, std::string group)
    : r_(world_size, rank, faults::none, std::move(group)) {}

  float step(int k) {
    float loss = r_.backward(k, [](size_t) {});
    coll::allreduce(r_.gradient(), r_.group(), coll::reduce_op::average);
    r_.update();
    return loss;
  }

  // Everything the next step depends on: the weights, the optimizer's
  // velocity and step count, and which step comes next (it picks the
  // batch).
  void save(std::string path, int next_step) {
    lumen::ml::safetensors_file f;
    f.tensors["weights"] = lumen::ml::tensor::from(r_.weights());
    f.tensors["velocity"] =
      lumen::ml::tensor::from(*r_.optimizer().state().front());
    f.metadata["next_step"] = std::to_string(next_step);
    f.metadata["optimizer_steps"] = std::to_string(r_.optimizer().steps());
    lumen::ml::save_safetensors(path, f);
  }

  // Reads what save wrote; returns the step to go on from.
  int load(std::string path) {
    auto f = lumen::ml::load_safetensors(path);
    r_.weights() = f.tensors.at("weights").to_vector<float>();
    *r_.optimizer().state().front() =
      f.tensors.at("velocity").to_vector<float>();
    r_.optimizer().set_steps(std::stoull(f.metadata.at("optimizer_steps")));
    return std::stoi(f.metadata.at("next_step"));
  }

  std::vector<float> weights() {
    return r_.weights();
  }

private:
  replica r_;
};

// Trains `steps` steps; rank 0 writes a checkpoint after every fifth. A
// step that fails (a node died) costs the steps since the last
// checkpoint: three new replicas load it and the run goes on from there.
std::vector<float> train(replica_cluster<Replica>& cluster, int steps) {
  auto replicas = cluster.start();
  for (int k = 0; k < steps;) {
    try {
      step_all(replicas, k);
      ++k;
      if (k % 5 == 0)
        lumen::get(replicas[0].call(&Replica::save, cluster.checkpoint(), k));
    } catch (const lumen::error& e) {
      std::cout << "step " << k << " failed: " << e.what() << "\n";
      replicas = cluster.start();
      k = 0;
      if (std::filesystem::exists(cluster.checkpoint())) {
        std::vector<lumen::ObjectRef<int>> loaded;
        for (auto& r : replicas)
          loaded.push_back(r.call(&Replica::load, cluster.checkpoint()));
        k = lumen::get(loaded).front();
      }
      std::cout << "resumed at step " << k << "\n";
    }
  }
  return weights_of(replicas).front();
}

} // namespace scratch04

LUMEN_ACTOR(scratch04::Replica, &scratch04::Replica::step,
            &scratch04::Replica::save, &scratch04::Replica::load,
            &scratch04::Replica::weights);
LUMEN_ACTOR_CTOR(scratch04::Replica(int, int, std::string));

int main(int argc, char** argv) {
  return scratch04::main_resume<scratch04::Replica>(argc, argv,
                                                    scratch04::train);
}
