// The cluster's key-value store: small declarations every process of a
// cluster reads, kept by the head (Ray's internal KV).
//
// Teaches: `lumen::kv::put` / `get` / `erase`, a task on a node reading
// what the script put, and `put` with overwrite=false to claim a key (of
// many processes trying, one succeeds).
//
// Run, in two terminals: the cluster (a head and a node) in the first,
//   ./.build/examples/cluster/kv_store start --head --block &
//   ./.build/examples/cluster/kv_store start --address 127.0.0.1:6380 --block
// the script in the second:
//   ./.build/examples/cluster/kv_store --address=127.0.0.1:6380
// The script prints "a node read: hello from the driver", "claimed
// demo/leader" and "kv_store: all steps ok". Alone (no --address), the
// store is the process's own, and it prints the same.

#include <iostream>
#include <string>

#include <lumen/cli.hpp>
#include <lumen/cluster.hpp>
#include <lumen/lumen.hpp>

// [kv-task]
// Reads what the driver left in the cluster's key-value store.
std::string greeting() {
  return lumen::kv::get("demo/greeting").value_or("(nothing)");
}
LUMEN_REMOTE(greeting);
// [/kv-task]

int main(int argc, char** argv) {
  // `kv_store start ...` makes this program a head or a node.
  if (argc > 1 && std::string{argv[1]} == "start")
    return lumen::cli_main(argc, argv);
  lumen::init(argc, argv);

  // [kv]
  // A small declaration for every process of the cluster, kept by the head.
  lumen::kv::put("demo/greeting", "hello from the driver");
  auto heard = lumen::task(greeting).spread().remote();
  std::cout << "a node read: " << lumen::get(heard) << "\n";
  bool mine = lumen::kv::put("demo/leader", "driver", /*overwrite=*/false);
  std::cout << (mine ? "claimed" : "lost") << " demo/leader\n";
  lumen::kv::erase("demo/leader");
  // [/kv]

  lumen::shutdown();
  std::cout << "kv_store: all steps ok\n";
}
