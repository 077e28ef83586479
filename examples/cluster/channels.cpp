// Channels: a byte stream between two processes of a cluster, for traffic
// too heavy or too chatty for calls.
//
// Teaches: `lumen::listen` under a name in a task on some node, and
// `lumen::connect` to that name from the script: the head's directory says
// where the listener is, and the bytes go straight between the two
// processes.
//
// Run, in two terminals: the cluster (a head and a node) in the first,
//   ./.build/examples/cluster/channels start --head --block &
//   ./.build/examples/cluster/channels start --address 127.0.0.1:6380 --block
// the script in the second:
//   ./.build/examples/cluster/channels --address=127.0.0.1:6380
// The script prints "sum of squares over a channel = 332833500 (1000 sent)"
// and "channels: all steps ok".

#include <chrono>
#include <cstdint>
#include <iostream>
#include <string>

#include <lumen/cli.hpp>
#include <lumen/cluster.hpp>
#include <lumen/lumen.hpp>

// [channel-task]
// Streams the squares 0, 1, 4, ... to whoever connects to "squares".
int64_t stream_squares(int count) {
  auto listener = lumen::listen("squares");
  auto c = listener.accept(std::chrono::seconds(10));
  int64_t sent = 0;
  for (int64_t i = 0; i < count; ++i, ++sent) {
    int64_t square = i * i;
    c.send(&square, sizeof(square));
  }
  return sent;
}
LUMEN_REMOTE(stream_squares);
// [/channel-task]

int main(int argc, char** argv) {
  // `channels start ...` makes this program a head or a node.
  if (argc > 1 && std::string{argv[1]} == "start")
    return lumen::cli_main(argc, argv);
  lumen::init(argc, argv);

  // [channel]
  // A task on some node listens; this script connects by name, and the
  // bytes go straight between the two processes.
  auto streamed = lumen::task(stream_squares).spread().remote(1000);
  auto squares = lumen::connect("squares", std::chrono::seconds(10));
  int64_t sum = 0;
  for (int i = 0; i < 1000; ++i) {
    int64_t square = 0;
    squares.recv(&square, sizeof(square));
    sum += square;
  }
  std::cout << "sum of squares over a channel = " << sum << " ("
            << lumen::get(streamed) << " sent)\n"; // 332833500
  // [/channel]

  lumen::shutdown();
  std::cout << "channels: all steps ok\n";
}
