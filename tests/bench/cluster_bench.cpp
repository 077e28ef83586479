// cluster_bench: Lumen across processes on loopback, next to raw TCP in the
// same run, plain and over TLS (`--tls`, each next to its plain twin). This
// program also serves as the cluster's nodes: started with
// --serve it runs `lumen::cli_main`, the way a user's program can.
//
//   ./.build/tests/bench/cluster_bench [--json] [--reps=N] [--smoke]
//
// Figures: 1:1 calls to an actor in another process (sync: one at a time;
// async: a batch, then all results), tensor round trips (a float vector to
// the actor and back; MB/s counts both directions), and the baselines: a
// TCP ping-pong of a 4-byte message and a TCP echo of the same payloads
// (tcp_bulk is the 64 MiB one). ref_node_to_node: a tensor made on one node
// (the head), whose ref the driver hands to a task on another (node-1),
// which fetches it from its owner; MB/s counts the one way it travels.
// TLS's stages apart, one core each, next to a copy of the same bytes
// (memcpy): tls_seal (the sender's record layer) and tls_open (the
// reader's), on the largest payload in memory.

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <lumen/cli.hpp>
#include <lumen/cluster.hpp>
#include <lumen/lumen.hpp>
#include <lumen/util/huge_pages.hpp>

#include <openssl/evp.h>

#include "bench_nodes.hpp"
#include "bench_report.hpp"
#include "security/tls_records.hpp"
#include "tcp_baseline.hpp"

namespace {

class Echo {
public:
  int ping(int x) {
    return x;
  }
  std::vector<float> echo(const std::vector<float>& xs) {
    return xs;
  }
};
LUMEN_ACTOR(Echo, &Echo::ping, &Echo::echo);
LUMEN_ACTOR_CTOR(Echo());

lumen::ObjectRef<std::vector<float>> make_tensor(int64_t n) {
  return lumen::put(std::vector<float>(static_cast<size_t>(n), 1.5f));
}
LUMEN_REMOTE(make_tensor);

int64_t tensor_size(lumen::ObjectRef<std::vector<float>> ref) {
  return static_cast<int64_t>(lumen::get(ref).size());
}
LUMEN_REMOTE(tensor_size);

using lumen::bench::figure;
using lumen::bench::rate;
using lumen::bench::serve;
using lumen::bench::verify;
using lumen::bench::warm_rate;

double mb_per_s(double round_trips_per_s, size_t payload) {
  return round_trips_per_s * 2.0 * static_cast<double>(payload) / 1e6;
}

} // namespace

int main(int argc, char** argv) {
  lumen::util::use_huge_pages();
  if (argc > 1 && std::string{argv[1]} == "--serve")
    return lumen::cli_main(argc - 1, argv + 1);
  auto opts = lumen::bench::options_or_exit(
    argc, argv, "cluster_bench",
    "cross-process actor calls and tensor round trips, "
    "next to raw TCP");
  long calls = opts.smoke ? 200 : 20000;
  std::vector<std::pair<std::string, size_t>> tensors =
    opts.smoke ? std::vector<std::pair<std::string, size_t>>{{"4MiB", 1 << 16}}
               : std::vector<std::pair<std::string, size_t>>{
                   {"4MiB", 4u << 20}, {"64MiB", 64u << 20}};
  std::vector<figure> figs;

  // Baselines first: the echo server forks, which must happen before any
  // thread exists.
  auto tcp = std::make_unique<lumen::bench::tcp_echo>();
  std::vector<char> small(4), back;
  figs.push_back({"tcp_pingpong", "ops/s",
                  rate(opts.reps, calls,
                       [&] {
                         for (long i = 0; i < calls; ++i)
                           tcp->round_trip(small, back);
                       }),
                  calls});
  std::vector<figure> tcp_bulk;
  for (auto& [label, bytes] : tensors) {
    std::vector<char> payload(bytes, 'x');
    int n = opts.smoke ? 2 : (bytes > (8u << 20) ? 3 : 20);
    auto rts = warm_rate(opts.reps, n, [&] {
      for (int i = 0; i < n; ++i)
        tcp->round_trip(payload, back);
      verify(back == payload, "tcp echo");
    });
    for (auto& r : rts)
      r = mb_per_s(r, bytes);
    // The largest payload is the bulk baseline the issue names `tcp_bulk`.
    auto name = &label == &tensors.back().first ? std::string{"tcp_bulk"}
                                                : "tcp_bulk_" + label;
    tcp_bulk.push_back({name, "MB/s", rts, n, long(bytes)});
  }
  tcp.reset();

  std::vector<figure> stages;
  {
    auto bytes = tensors.back().second;
    std::vector<char> plain(bytes, 'x'), copy(bytes), opened(bytes);
    std::vector<char> sealed;
    sealed.reserve(bytes + bytes / 512);
    auto per_s = [&](std::vector<double> rts) {
      for (auto& r : rts)
        r = r * static_cast<double>(bytes) / 1e6;
      return rts;
    };
    stages.push_back({"memcpy_" + tensors.back().first, "MB/s",
                      per_s(rate(opts.reps, 1,
                                 [&] {
                                   std::memcpy(copy.data(), plain.data(),
                                               bytes);
                                   verify(copy[bytes - 1] == 'x', "memcpy");
                                 })),
                      1, long(bytes)});
    lumen::detail::tls_traffic_key key;
    key.cipher = EVP_aes_128_gcm(); // what a token-keyed cluster agrees on
    // Each repetition seals and opens with fresh records, numbered from 0.
    std::unique_ptr<lumen::detail::tls_records> writer, reader;
    std::vector<double> seal_s, open_s;
    for (int r = 0; r < opts.reps; ++r) {
      writer = std::make_unique<lumen::detail::tls_records>(key, key);
      reader = std::make_unique<lumen::detail::tls_records>(key, key);
      sealed.clear();
      seal_s.push_back(
        rate(1, 1, [&] { writer->seal(plain.data(), bytes, sealed); })[0]);
      open_s.push_back(rate(1, 1, [&] {
        size_t fed = 0, got = 0;
        while (got < bytes) {
          auto room = reader->raw_space();
          auto k = std::min(room.iov_len, sealed.size() - fed);
          std::memcpy(room.iov_base, sealed.data() + fed, k);
          reader->raw_came(k);
          fed += k;
          got += reader->take(opened.data() + got, bytes - got);
          verify(!reader->failed(), "tls open: " + reader->why());
        }
      })[0]);
    }
    verify(opened == plain, "tls records round trip");
    stages.push_back({"tls_seal_" + tensors.back().first, "MB/s", per_s(seal_s),
                      1, long(bytes)});
    stages.push_back({"tls_open_" + tensors.back().first, "MB/s", per_s(open_s),
                      1, long(bytes)});
    lumen::bench::compare(stages[1], stages[0]);
    lumen::bench::compare(stages[2], stages[0]);
  }

  char tmpl[] = "/tmp/lumen-bench-XXXXXX";
  std::string token_file = std::string{::mkdtemp(tmpl)} + "/token";
  // The same cluster twice, plain and over TLS keyed by the token: each TLS
  // figure is compared with its plain twin, which prints TLS's cost.
  std::vector<figure> plain;
  for (bool tls : {false, true}) {
    std::vector<std::string> secure;
    if (tls)
      secure.push_back("--tls");
    auto flags = [&](std::vector<std::string> args) {
      args.insert(args.end(), secure.begin(), secure.end());
      return args;
    };
    auto head =
      serve(flags({"--head", "--port", "0", "--token-file", token_file}));
    auto node =
      serve(flags({"--address", head.address, "--token-file", token_file}));
    lumen::init_options init;
    init.address = head.address;
    init.token_file = token_file;
    init.tls.enabled = tls;
    lumen::init(init);
    auto echo = lumen::actor<Echo>().on_node("node-1").remote();
    verify(lumen::get(echo.call(&Echo::ping, 7)) == 7, "ping");
    std::vector<figure> mine;
    auto suffix = tls ? std::string{"_tls"} : std::string{};
    auto add = [&](figure f, const figure& baseline) {
      f.name += suffix;
      mine.push_back(std::move(f));
      lumen::bench::compare(mine.back(),
                            tls ? plain.at(mine.size() - 1) : baseline);
    };

    add({"remote_actor_calls_sync", "ops/s",
         rate(opts.reps, calls,
              [&] {
                long sum = 0;
                for (int i = 0; i < calls; ++i)
                  sum += lumen::get(echo.call(&Echo::ping, i));
                verify(sum == calls * (calls - 1) / 2, "sync sum");
              }),
         calls},
        figs[0]);
    add({"remote_actor_calls_async", "ops/s",
         rate(opts.reps, calls,
              [&] {
                std::vector<lumen::ObjectRef<int>> refs;
                refs.reserve(calls);
                for (int i = 0; i < calls; ++i)
                  refs.push_back(echo.call(&Echo::ping, i));
                long sum = 0;
                for (int v : lumen::get(refs))
                  sum += v;
                verify(sum == calls * (calls - 1) / 2, "async sum");
              }),
         calls},
        figs[0]);
    for (size_t t = 0; t < tensors.size(); ++t) {
      auto& [label, bytes] = tensors[t];
      std::vector<float> payload(bytes / sizeof(float), 1.5f);
      auto ref = lumen::put(payload);
      int n = opts.smoke ? 2 : (bytes > (8u << 20) ? 3 : 20);
      auto rts = warm_rate(opts.reps, n, [&] {
        for (int i = 0; i < n; ++i)
          verify(lumen::get(echo.call(&Echo::echo, ref)).size() ==
                   payload.size(),
                 "tensor echo");
      });
      for (auto& r : rts)
        r = mb_per_s(r, bytes);
      add({"tensor_roundtrip_" + label, "MB/s", rts, n, long(bytes)},
          tcp_bulk[t]);
    }
    {
      // Each task decodes a ref of its own, which fetches anew.
      auto bytes = tensors.back().second;
      auto floats = static_cast<int64_t>(bytes / sizeof(float));
      auto made =
        lumen::get(lumen::task(make_tensor).on_node("head").remote(floats));
      int n = opts.smoke ? 2 : 3;
      auto rts = warm_rate(opts.reps, n, [&] {
        for (int i = 0; i < n; ++i)
          verify(lumen::get(
                   lumen::task(tensor_size).on_node("node-1").remote(made)) ==
                   floats,
                 "ref node to node");
      });
      for (auto& r : rts)
        r = r * static_cast<double>(bytes) / 1e6;
      add({"ref_node_to_node_" + tensors.back().first, "MB/s", rts, n,
           long(bytes)},
          tcp_bulk.back());
    }
    // The control plane (CAF's middleman, relayed through TLS when on): the
    // head's directory, asked for again and again.
    long queries = opts.smoke ? 20 : 2000;
    add({"directory_queries", "ops/s",
         rate(opts.reps, queries,
              [&] {
                for (long i = 0; i < queries; ++i)
                  verify(lumen::nodes().size() == 2, "directory");
              }),
         queries},
        figs[0]);
    lumen::shutdown();
    node.proc->kill(SIGTERM);
    head.proc->kill(SIGTERM);
    if (!tls)
      plain = mine;
    figs.insert(figs.end(), mine.begin(), mine.end());
  }
  for (auto& f : tcp_bulk)
    figs.push_back(f);
  for (auto& f : stages)
    figs.push_back(f);
  lumen::bench::print("cluster_bench", figs, opts.json);
}
