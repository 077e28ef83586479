#define BOOST_TEST_MODULE train_cli
#include <boost/test/unit_test.hpp>

// `lumen train fashion-mnist`, run as a user runs it (the lumen command,
// its workers local node processes): the CSV's columns and rows, the plot,
// a checkpoint whose file alone rebuilds the model and gives the accuracy
// reported, --resume continuing the same loss curve to the bit, and bad
// input refused with the fix named: damaged checkpoints, a diverging run,
// a full disk, bad data and every flag, none of them costing a restart.

#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <lumen/ml.hpp>

#include "eventually.hpp"
#include "train_run.hpp"

namespace fs = std::filesystem;

namespace {

using lumen::test::cells;
using lumen::test::has;
using lumen::test::lines_of;
using lumen::test::read_bytes;
using lumen::test::train;

void write_bytes(const fs::path& file, const std::vector<char>& bytes) {
  std::ofstream out{file, std::ios::binary | std::ios::trunc};
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

/// A failure a restart cannot mend is reported as itself, at once.
void no_restart_in(const std::string& out) {
  BOOST_TEST(!has(out, "worker lost"), out);
  BOOST_TEST(!has(out, "restarts"), out);
}

} // namespace

BOOST_AUTO_TEST_CASE(a_run_writes_csv_plot_and_a_checkpoint_that_resumes) {
  auto dir = lumen::test::fresh_dir("train-cli");
  auto [code, out] = train(dir, "a");
  BOOST_REQUIRE_MESSAGE(code == 0, out);
  BOOST_TEST(has(out, "epoch   1/2  loss"), out);
  BOOST_TEST(has(out, "epoch   2/2  loss"), out);
  auto run = fs::path{dir} / "a";
  auto csv = lines_of(run / "metrics.csv");
  BOOST_REQUIRE_EQUAL(csv.size(), 3u);
  BOOST_TEST(csv[0] == "epoch,loss,test_loss,test_accuracy,epoch_seconds,"
                       "samples_per_second,exposed_allreduce_seconds,drift,"
                       "workers");
  auto second = cells(csv[2]);
  BOOST_REQUIRE_EQUAL(second.size(), 9u);
  BOOST_TEST(second[0] == "2");
  BOOST_TEST(second[7] == "0"); // the replicas stayed identical
  BOOST_TEST(second[8] == "2"); // the epoch's workers
  auto svg = lines_of(run / "metrics.svg");
  BOOST_REQUIRE(!svg.empty());
  BOOST_TEST(svg[0].rfind("<svg", 0) == 0u);

  // The checkpoint's file alone rebuilds the model: its layers, its
  // architecture, the normalisation of its inputs.
  auto file = lumen::ml::load_model_file(
    (run / "checkpoint_1/model.safetensors").string());
  BOOST_TEST(file.spec.kind == "mlp");
  BOOST_TEST((file.spec.hidden == std::vector<uint64_t>{256, 128}));
  BOOST_TEST(file.metadata.at("epochs_done") == "2");
  BOOST_TEST(has(file.metadata.at("classes"), "Ankle boot"));
  BOOST_TEST(lumen::test::accuracy_of(file, 1000) == std::stod(second[3]),
             boost::test_tools::tolerance(1e-5));

  // Resumed after epoch 1, epoch 2 comes out as it did: the same batches,
  // the same momentum, the same learning rate.
  auto [again, out2] =
    train(dir, "b", {"--resume", (run / "checkpoint_0").string()});
  BOOST_REQUIRE_MESSAGE(again == 0, out2);
  BOOST_TEST(has(out2, "(1 epochs done)"), out2);
  auto resumed = lines_of(fs::path{dir} / "b" / "metrics.csv");
  BOOST_REQUIRE_EQUAL(resumed.size(), 2u);
  auto row = cells(resumed[1]);
  BOOST_TEST(row[0] == "2");
  BOOST_TEST(row[1] == second[1]); // training loss
  BOOST_TEST(row[3] == second[3]); // test accuracy

  // --resume alone takes the run's latest; it has every epoch done.
  auto [done, out3] = train(dir, "a", {"--resume"});
  BOOST_TEST(done == 2, out3);
  BOOST_TEST(has(out3, "2 epochs done already; ask for more with --epochs"),
             out3);
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(bad_input_is_refused_naming_the_fix) {
  auto dir = lumen::test::fresh_dir("train-cli");
  auto [code, out] = train(dir, "x", {"--data", dir + "/nowhere"});
  BOOST_TEST(code == 1, out);
  BOOST_TEST(has(out, "apt-get install dataset-fashion-mnist"), out);

  auto bad = dir + "/bad.safetensors";
  std::ofstream{bad} << "not a checkpoint at all";
  std::tie(code, out) = train(dir, "x", {"--resume", bad});
  BOOST_TEST(code == 1, out);
  BOOST_TEST(has(out, bad), out);

  std::tie(code, out) = train(dir, "x", {"--resume", dir + "/none"});
  BOOST_TEST(code == 1, out);
  BOOST_TEST(has(out, dir + "/none: cannot be opened"), out);

  std::tie(code, out) = train(dir, "x", {"--min-workers", "3"});
  BOOST_TEST(code == 2, out);
  BOOST_TEST(has(out, "--min-workers 3 is above --workers 2"), out);

  std::tie(code, out) = train(dir, "x", {"--max-workers", "1"});
  BOOST_TEST(code == 2, out);
  BOOST_TEST(has(out, "--max-workers 1 is below --workers 2"), out);

  std::tie(code, out) = train(dir, "x", {"--max-workers", "3"});
  BOOST_TEST(code == 2, out);
  BOOST_TEST(has(out, "makes the run elastic: give --min-workers too"), out);

  std::tie(code, out) = train(dir + "/bad.safetensors/under", "x");
  BOOST_TEST(code == 1, out);
  BOOST_TEST(has(out, "give a storage path you can write"), out);

  std::tie(code, out) = train(dir, "x", {"--epochs", "0"});
  BOOST_TEST(code == 2, out);
  BOOST_TEST(has(out, "--epochs"), out);

  std::tie(code, out) = train(dir, "x", {"--no-such-flag"});
  BOOST_TEST(code == 2, out);
  BOOST_TEST(has(out, "unknown flag '--no-such-flag'"), out);

  std::tie(code, out) = train(dir, "x", {"--hidden", "256,zero"});
  BOOST_TEST(code == 2, out);
  BOOST_TEST(has(out, "e.g. 256,128"), out);
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(a_damaged_checkpoint_is_named_and_resume_skips_it) {
  auto dir = lumen::test::fresh_dir("train-cli");
  auto [code, out] = train(dir, "a");
  BOOST_REQUIRE_MESSAGE(code == 0, out);
  auto run = fs::path{dir} / "a";
  auto model = run / "checkpoint_1" / "model.safetensors";
  auto whole = read_bytes(model);
  // One bit of the last tensor's bytes (the file's end) flipped.
  auto damaged = whole;
  damaged[damaged.size() - 3] ^= 0x10;
  write_bytes(model, damaged);
  std::tie(code, out) =
    train(dir, "b", {"--epochs", "3", "--resume", model.string()});
  BOOST_TEST(code == 1, out);
  BOOST_TEST(has(out, model.string()), out);
  BOOST_TEST(has(out, "does not match its checksum"), out);
  BOOST_TEST(!fs::exists(fs::path{dir} / "b"), out);
  // --resume alone takes the latest that verifies, saying what it skipped.
  std::tie(code, out) = train(dir, "a", {"--epochs", "3", "--resume"});
  BOOST_TEST(code == 0, out);
  BOOST_TEST(has(out, "skipping " + (run / "checkpoint_1").string()), out);
  BOOST_TEST(has(out, "(1 epochs done)"), out);
  BOOST_TEST(has(out, "epoch   3/3"), out);
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(a_run_that_diverges_stops_naming_the_step) {
  auto dir = lumen::test::fresh_dir("train-cli");
  auto [code, out] = train(dir, "lr10", {"--lr", "10"});
  BOOST_TEST(code == 1, out);
  BOOST_TEST(has(out, "training diverged at epoch 1, step"), out);
  BOOST_TEST(has(out, "lower the learning rate (--lr)"), out);
  BOOST_TEST(!has(out, "loss -inf"), out);
  BOOST_TEST(!has(out, "test accuracy"), out);
  no_restart_in(out);
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(a_full_disk_stops_the_run_leaving_whole_checkpoints) {
  // Room for one checkpoint (1.9 MB: the model and its velocity), not two.
  auto dir = lumen::test::fresh_dir("train-cli");
  BOOST_REQUIRE_MESSAGE(
    std::system(("mount -t tmpfs -o size=2600k tmpfs " + dir).c_str()) == 0,
    "this test mounts a tmpfs, as root");
  auto [code, out] = train(dir, "full", {"--epochs", "3"});
  BOOST_TEST(code == 1, out);
  BOOST_TEST(has(out, "No space left on device"), out);
  BOOST_TEST(
    has(out, "the last good checkpoint: " + dir + "/full/checkpoint_0"), out);
  no_restart_in(out);
  auto run = fs::path{dir} / "full";
  std::vector<std::string> entries;
  for (auto& e : fs::directory_iterator{run})
    if (e.is_directory())
      entries.push_back(e.path().filename().string());
  BOOST_TEST((entries == std::vector<std::string>{"checkpoint_0"}));
  lumen::ml::load_model_file((run / "checkpoint_0/model.safetensors").string());
  // The good one resumes (into a run folder on the real disk).
  auto elsewhere = lumen::test::fresh_dir("train-cli");
  std::tie(code, out) =
    train(elsewhere, "full",
          {"--resume", (run / "checkpoint_0").string(), "--epochs", "2"});
  BOOST_TEST(code == 0, out);
  BOOST_TEST(has(out, "(1 epochs done)"), out);
  BOOST_TEST(std::system(("umount " + dir).c_str()) == 0);
  fs::remove_all(dir);
  fs::remove_all(elsewhere);
}

BOOST_AUTO_TEST_CASE(bad_training_data_is_named_without_a_restart) {
  // The test set is good (the driver checks it first); the training
  // images, read by the workers, are cut short.
  auto dir = lumen::test::fresh_dir("train-cli");
  auto data = fs::path{dir} / "data";
  fs::create_directories(data);
  auto real = fs::path{lumen::ml::fashion_mnist_dir};
  for (auto& e : fs::directory_iterator{real})
    fs::copy(e.path(), data / e.path().filename());
  fs::path train_images;
  for (auto& e : fs::directory_iterator{data})
    if (has(e.path().filename().string(), "train-images"))
      train_images = e.path();
  BOOST_REQUIRE(!train_images.empty());
  auto bytes = read_bytes(train_images);
  bytes.resize(bytes.size() / 2);
  write_bytes(train_images, bytes);
  auto [code, out] = train(dir, "bad", {"--data", data.string()});
  BOOST_TEST(code == 1, out);
  BOOST_TEST(has(out, train_images.string()), out);
  no_restart_in(out);
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(every_flag_is_checked_naming_the_flag) {
  auto dir = lumen::test::fresh_dir("train-cli");
  // Each: the flags, what the message must say.
  std::vector<std::pair<std::vector<std::string>, std::string>> cases{
    {{"--name", "../../x"}, "--name"},
    {{"--name", "/abs/x"}, "--name"},
    {{"--name", ""}, "--name"},
    {{"--lr", "nan"}, "--lr"},
    {{"--weight-decay", "nan"}, "--weight-decay"},
    {{"--batch", "5000", "--limit", "2000"}, "--batch"},
    {{"--limit", "1"}, "--limit"},
    {{"--data", ""}, "--data"},
    {{"--limit", "-1"}, "--limit"},
    {{"--test-limit", "-5"}, "--test-limit"},
    {{"--test-limit", "1"}, "--test-limit"},
    {{"--seed", "-1"}, "--seed"},
    {{"--hidden", ""}, "--hidden"},
    {{"--storage", ""}, "--storage"},
    {{"--resume", ""}, "--resume"},
  };
  for (auto& [flags, says] : cases) {
    auto [code, out] = train(dir, "flags", flags);
    BOOST_TEST(code == 2, flags[0] << " " << flags[1] << ": " << out);
    BOOST_TEST(has(out, says), out);
    BOOST_TEST(has(out, "lumen train fashion-mnist --help"), out);
  }
  BOOST_TEST(!fs::exists(fs::path{dir} / "flags"));
  BOOST_TEST(!fs::exists(fs::path{dir}.parent_path().parent_path() / "x"));
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(the_same_seed_gives_the_same_bits_on_the_full_data_set) {
  // All 60,000 images: an epoch of one worker, two of two, twice each,
  // and a resume from the first of two epochs.
  auto dir = lumen::test::fresh_dir("train-cli");
  auto model = [&](const std::string& run, int k) {
    return read_bytes(fs::path{dir} / run /
                      ("checkpoint_" + std::to_string(k)) /
                      "model.safetensors");
  };
  auto full = [&](const std::string& name, const std::string& workers,
                  const std::string& epochs,
                  std::vector<std::string> more = {}) {
    more.insert(more.end(), {"--workers", workers, "--epochs", epochs,
                             "--limit", "0", "--test-limit", "0"});
    auto [code, out] = train(dir, name, more);
    BOOST_REQUIRE_MESSAGE(code == 0, out);
  };
  for (auto name : {"one-a", "one-b"})
    full(name, "1", "1");
  BOOST_TEST((model("one-a", 0) == model("one-b", 0)));
  for (auto name : {"two-a", "two-b"})
    full(name, "2", "2");
  BOOST_TEST((model("two-a", 0) == model("two-b", 0)));
  BOOST_TEST((model("two-a", 1) == model("two-b", 1)));
  full("two-resumed", "2", "2",
       {"--resume", (fs::path{dir} / "two-a" / "checkpoint_0").string()});
  BOOST_TEST((model("two-resumed", 0) == model("two-a", 1)));
  BOOST_TEST(!model("two-a", 1).empty());
  fs::remove_all(dir);
}

namespace {

/// The pids of `parent`'s children.
std::vector<pid_t> children_of(pid_t parent) {
  auto id = std::to_string(parent);
  std::ifstream in{"/proc/" + id + "/task/" + id + "/children"};
  std::vector<pid_t> out;
  for (pid_t p; in >> p;)
    out.push_back(p);
  return out;
}

} // namespace

BOOST_AUTO_TEST_CASE(a_lost_worker_without_restarts_names_the_flag) {
  auto dir = lumen::test::fresh_dir("train-cli");
  lumen::test::process run{{LUMEN_CLI, "train", "fashion-mnist", "--workers",
                            "2", "--epochs", "50", "--limit", "8192",
                            "--test-limit", "1000", "--storage", dir,
                            "--max-failures", "0", "--progress", "lines"}};
  BOOST_REQUIRE_MESSAGE(
    run.await_output("epoch   2/", std::chrono::seconds(60)), run.output());
  auto workers = children_of(run.pid());
  BOOST_REQUIRE_MESSAGE(!workers.empty(), run.output());
  ::kill(workers.front(), SIGKILL); // a local node process, a worker's
  BOOST_TEST(run.wait() == 1, run.output());
  auto out = run.output();
  BOOST_TEST(has(out, "--max-failures N allows N restarts"), out);
  BOOST_TEST(!has(out, "failure_config"), out);
  BOOST_TEST(has(out, "the last good checkpoint: " + dir), out);
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(a_killed_run_takes_its_local_workers_with_it) {
  // Workers that report only every 100,000 steps run a loop that meets
  // nobody but its peers: a node that, told to stop, waited for it to
  // return would train on, unseen, long after its program was gone.
  for (int sig : {SIGTERM, SIGKILL}) {
    auto dir = lumen::test::fresh_dir("train-cli");
    auto text = fs::path{dir} / "abc.txt";
    {
      std::ofstream out{text};
      for (int i = 0; i < 4000; ++i)
        out << "abcdefgh\n";
    }
    lumen::test::process run{
      {LUMEN_CLI, "train", "text", "--data", text.string(), "--model",
       "embed(V,16)-res(norm-attn(2))-norm-dense(V)", "--length", "16",
       "--steps", "1000000", "--eval-every", "100000", "--storage", dir}};
    // Both workers at work: a second of the CPU each.
    auto cpu_seconds = [](pid_t pid) {
      std::ifstream stat{"/proc/" + std::to_string(pid) + "/stat"};
      std::string field;
      for (int i = 0; i < 14 && stat >> field;)
        ++i;
      return stat ? std::stod(field) / double(::sysconf(_SC_CLK_TCK)) : 0.0;
    };
    std::vector<pid_t> workers;
    BOOST_REQUIRE_MESSAGE(
      lumen::test::eventually(
        [&] {
          workers = children_of(run.pid());
          return workers.size() == 2 && cpu_seconds(workers[0]) > 1 &&
                 cpu_seconds(workers[1]) > 1;
        },
        std::chrono::milliseconds(50), std::chrono::seconds(60)),
      run.output());
    run.kill(sig);
    run.wait();
    for (auto pid : workers) {
      auto gone = [pid] {
        std::ifstream stat{"/proc/" + std::to_string(pid) + "/stat"};
        std::string id, name, state;
        // A zombie has ended; init reaps it.
        return !(stat >> id >> name >> state) || state == "Z";
      };
      BOOST_TEST(lumen::test::eventually(gone, std::chrono::milliseconds(20),
                                         std::chrono::seconds(10)),
                 "local node " << pid << " still runs after its program "
                               << "got " << strsignal(sig));
      if (!gone())
        ::kill(pid, SIGKILL);
    }
    fs::remove_all(dir);
  }
}

BOOST_AUTO_TEST_CASE(a_head_killed_mid_run_stops_it_saying_so) {
  auto dir = lumen::test::fresh_dir("train-cli");
  auto token = dir + "/token";
  std::vector<std::string> env{"HOME=" + dir};
  lumen::test::process head{{LUMEN_CLI, "start", "--block", "--head", "--port",
                             "0", "--token-file", token},
                            env};
  auto started = head.await_output("(pid", std::chrono::seconds(30));
  BOOST_REQUIRE_MESSAGE(started, head.output());
  auto address = lumen::test::parse_started(*started)->address;
  std::vector<std::unique_ptr<lumen::test::process>> nodes;
  for (int i = 0; i < 2; ++i) {
    nodes.push_back(std::make_unique<lumen::test::process>(
      std::vector<std::string>{LUMEN_CLI, "start", "--block", "--address",
                               address, "--token-file", token},
      env));
    BOOST_REQUIRE_MESSAGE(
      nodes.back()->await_output("(pid", std::chrono::seconds(30)),
      nodes.back()->output());
  }
  lumen::test::process run{{LUMEN_CLI, "train", "fashion-mnist", "--address",
                            address, "--token-file", token, "--workers", "2",
                            "--epochs", "50", "--limit", "8192", "--test-limit",
                            "1000", "--storage", dir, "--progress", "lines"},
                           env};
  BOOST_REQUIRE_MESSAGE(
    run.await_output("epoch   2/", std::chrono::seconds(60)), run.output());
  head.kill(SIGKILL);
  BOOST_TEST(run.wait() == 1, run.output());
  auto out = run.output();
  BOOST_TEST(has(out, "the cluster's head went down mid-run"), out);
  BOOST_TEST(has(out, "the last good checkpoint: " + dir), out);
  BOOST_TEST(!has(out, "worker lost"), out);
  BOOST_TEST(!has(out, "lumen train: the head at"), out);
  for (auto& n : nodes)
    n->kill(SIGTERM);
  fs::remove_all(dir);
}
