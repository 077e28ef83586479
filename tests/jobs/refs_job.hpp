#pragma once

// The remote functions and actors of refs_test and util_procs_test
// (cluster_job.cpp): refs, handles and queues as arguments and results
// between processes.

#include <cstdint>
#include <string>
#include <vector>

#include <lumen/actor.hpp>
#include <lumen/object_store.hpp>
#include <lumen/util/queue.hpp>

#include "cluster_job.hpp"

// Refs as values.
int sum_refs(std::vector<lumen::ObjectRef<int>> refs);
int count_refs(const std::vector<lumen::ObjectRef<int>>& refs);
std::vector<lumen::ObjectRef<int>> make_refs(int n);
lumen::ObjectRef<std::vector<float>> make_tensor(int64_t n, float value);
double tensor_sum(lumen::ObjectRef<std::vector<float>> ref);
lumen::ObjectRef<int> pass_on(lumen::ObjectRef<int> ref);
// This process's lumen::ref_counts(): held, borrowed, served, fetched.
std::vector<int64_t> ref_counts_here();

// Handles as values.
int bump(lumen::ActorHandle<Counter> c, int by);
lumen::ActorHandle<Counter> make_counter(int start);
std::string handle_id(lumen::ActorHandle<Counter> c);
lumen::ActorHandle<Counter> echo_handle(lumen::ActorHandle<Counter> c);
void kill_it(lumen::ActorHandle<Counter> c);

// A queue as a value (util_procs_test): puts 0..n-1, or takes n and sums them.
int produce_into(lumen::util::queue<int> q, int n);
int64_t consume_from(lumen::util::queue<int> q, int n);

// Holds a Counter's handle that another process gave it.
class Keeper {
public:
  Keeper();
  void keep(lumen::ActorHandle<Counter> c);
  int poke(int by);
  void forget();

private:
  lumen::ActorHandle<Counter> kept_;
};
