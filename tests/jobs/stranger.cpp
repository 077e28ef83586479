// A process without the cluster token: plain CAF with a middleman,
// connecting to a head or node. It tries what CAF allows any peer to do
// and prints one line per attempt: "<what>: refused" or "<what>: ALLOWED".
//   stranger HOST PORT

#include <iostream>
#include <string>

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include "cluster_job.hpp"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: stranger HOST PORT\n";
    return 2;
  }
  std::string host = argv[1];
  auto port = static_cast<uint16_t>(std::stoi(argv[2]));
  caf::actor_system_config cfg;
  cfg.load<caf::io::middleman>();
  caf::actor_system sys{cfg};
  auto& mm = sys.middleman();
  auto manager = mm.remote_actor(host, port);
  if (!manager) {
    std::cout << "connect: refused\n";
    return 0;
  }
  std::cout << "connect: ALLOWED\n";
  auto nid = manager->node();
  auto spawned = mm.remote_spawn<calculator>(
    nid, "calculator", caf::make_message(), std::chrono::seconds(5));
  std::cout << "remote_spawn: " << (spawned ? "ALLOWED" : "refused") << "\n";
  if (spawned)
    caf::anon_send_exit(*spawned, caf::exit_reason::kill);
  caf::scoped_actor self{sys};
  bool answered = false;
  self
    ->request(*manager, std::chrono::seconds(5),
              caf::atom_constant<caf::atom("lmnodes")>::value)
    .receive([&](std::vector<char>&) { answered = true; }, [&](caf::error&) {});
  std::cout << "directory: " << (answered ? "ALLOWED" : "refused") << "\n";
}
