#define BOOST_TEST_MODULE train_models
#include <boost/test/unit_test.hpp>

// Models other than the MLP through `lumen train fashion-mnist`, run as a
// user runs it: the CNN preset and a spec of one's own train, their
// checkpoints name each layer's tensor by its place and rebuild the model
// from the file alone (with numpy too, examples/ml/rebuild_with_numpy.py),
// and a model that does not parse, does not fit or differs from the
// checkpoint's is refused naming what and where; --sync ps trains the same
// model through a parameter server. A character GPT learns a text with a
// rule and samples it, resumed it ends as the uninterrupted run; the
// preset trains on Debian's fortunes.

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <tuple>
#include <vector>

#include <lumen/ml.hpp>
#include <lumen/nn/sequential.hpp>
#include <lumen/train/fashion_mnist.hpp>
#include <lumen/train/text.hpp>

#include "train_run.hpp"

namespace fs = std::filesystem;
using lumen::test::cells;
using lumen::test::has;
using lumen::test::lines_of;
using lumen::test::read_bytes;
using lumen::test::train;

BOOST_AUTO_TEST_CASE(the_cnn_trains_and_its_checkpoint_rebuilds_it) {
  auto dir = lumen::test::fresh_dir("train-models");
  auto [code, out] = train(dir, "cnn", {"--model", "cnn"});
  BOOST_REQUIRE_MESSAGE(code == 0, out);
  BOOST_TEST(has(out, "training sequential 1x28x28 conv(32,3,1)-relu-pool(2)-"
                      "conv(64,3,1)-relu-pool(2)-dropout(25)-linear(128)-"
                      "relu-dropout(25)-linear(10) (421642 parameters)"),
             out);
  auto run = fs::path{dir} / "cnn";
  auto second = cells(lines_of(run / "metrics.csv").at(2));
  BOOST_TEST(std::stod(second[3]) > 0.5, out); // learned something

  auto file = lumen::ml::load_model_file(
    (run / "checkpoint_1/model.safetensors").string());
  BOOST_TEST(file.spec.kind == "sequential");
  BOOST_TEST(file.spec.layers == lumen::train::fashion_mnist_cnn);
  BOOST_TEST((file.spec.input == std::vector<uint64_t>{1, 28, 28}));
  BOOST_TEST(lumen::test::accuracy_of(file, 1000) == std::stod(second[3]),
             boost::test_tools::tolerance(1e-5));

  // numpy alone, from the file, gets the accuracy the run reported.
  auto [py, said] = lumen::test::run(
    {"/usr/bin/python3", NUMPY_REBUILD,
     (run / "checkpoint_1/model.safetensors").string(), "--limit", "1000"});
  BOOST_TEST(py == 0, said);
  char reported[32];
  std::snprintf(reported, sizeof reported, "accuracy %.4f on 1000",
                std::stod(second[3]));
  BOOST_TEST(has(said, reported), said << " (the run's: " << second[3] << ")");

  // Resumed as another model: refused before a worker starts.
  auto checkpoint = (run / "checkpoint_1").string();
  std::tie(code, out) =
    train(dir, "other", {"--resume", checkpoint, "--epochs", "3"});
  BOOST_TEST(code == 2, out);
  BOOST_TEST(has(out, "the checkpoint's model is sequential 1x28x28 "
                      "conv(32,3,1)"),
             out);
  BOOST_TEST(has(out, "this run's mlp 784-256-128-10; give the --model (and "
                      "--hidden) it was trained with"),
             out);
  BOOST_TEST(!fs::exists(fs::path{dir} / "other" / "metrics.csv"));
  // As itself, it goes on.
  std::tie(code, out) = train(
    dir, "more", {"--model", "cnn", "--resume", checkpoint, "--epochs", "3"});
  BOOST_TEST(code == 0, out);
  BOOST_TEST(has(out, "(2 epochs done)"), out);
  BOOST_TEST(has(out, "epoch   3/3"), out);

  // A model of one's own, padded.
  std::tie(code, out) =
    train(dir, "own",
          {"--model", "conv(8,5,2)-gelu-pool(2)-linear(10)", "--epochs", "1"});
  BOOST_TEST(code == 0, out);
  BOOST_TEST(has(out, "(15898 parameters)"), out);
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(the_same_run_through_a_parameter_server) {
  // --sync ps: the mean gradient through a server on rank 0; the same
  // model learns as it does on the ring, its replicas identical.
  auto dir = lumen::test::fresh_dir("train-models");
  auto [code, out] = train(dir, "ring", {"--epochs", "1"});
  BOOST_REQUIRE_MESSAGE(code == 0, out);
  std::tie(code, out) = train(dir, "ps", {"--epochs", "1", "--sync", "ps"});
  BOOST_REQUIRE_MESSAGE(code == 0, out);
  BOOST_TEST(has(out, "2 workers through a parameter server"), out);
  auto ring = cells(lines_of(fs::path{dir} / "ring" / "metrics.csv").at(1));
  auto ps = cells(lines_of(fs::path{dir} / "ps" / "metrics.csv").at(1));
  BOOST_TEST(std::stod(ps[3]) == std::stod(ring[3]),
             boost::test_tools::tolerance(0.01)); // test accuracy
  BOOST_TEST(std::stod(ps[1]) == std::stod(ring[1]),
             boost::test_tools::tolerance(0.01)); // training loss
  BOOST_TEST(ps[7] == "0"); // drift: every rank holds the server's weights
  // A learning rate that diverges stops every rank at once, naming it.
  std::tie(code, out) =
    train(dir, "nan", {"--epochs", "1", "--sync", "ps", "--lr", "10"});
  BOOST_TEST(code == 1, out);
  BOOST_TEST(has(out, "training diverged at epoch 1"), out);
  BOOST_TEST(has(out, "lower the learning rate (--lr)"), out);
  std::tie(code, out) = train(dir, "bad", {"--sync", "star"});
  BOOST_TEST(code == 2, out);
  BOOST_TEST(has(out, "--sync"), out);
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(a_model_that_does_not_parse_or_fit_is_named_at_once) {
  auto dir = lumen::test::fresh_dir("train-models");
  // Each: the --model, what the message must say.
  std::vector<std::pair<std::string, std::string>> cases{
    {"conv(32,3)-relu-poo(2)-linear(10)",
     "layer 2 (at character 17), an unknown layer 'poo'"},
    {"conv(32,3)-relu-pool(2)-linear(12)",
     "ends in 12 outputs where Fashion-MNIST has 10 classes; end it with "
     "linear(10)"},
    {"conv(8,30)-linear(10)", "its input 1x28x28 is smaller than a 30x30 "
                              "kernel"},
    {"conv(8,3", "at character 9, expected ',' or ')'"},
    {"", "expected a layer's name"},
  };
  for (auto& [model, says] : cases) {
    auto [code, out] = train(dir, "bad", {"--model", model});
    BOOST_TEST(code == 2, model << ": " << out);
    BOOST_TEST(has(out, "--model"), out);
    BOOST_TEST(has(out, says), out);
  }
  BOOST_TEST(!fs::exists(fs::path{dir} / "bad"));
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(a_character_gpt_learns_text_and_samples_it) {
  auto dir = lumen::test::fresh_dir("train-text");
  // A text with a rule to learn: each line counts up from its first digit.
  auto text = fs::path{dir} / "count.txt";
  {
    std::ofstream out{text};
    for (int i = 0; i < 3000; ++i) {
      for (int d = 0; d < 8; ++d)
        out << char('0' + (i + d) % 10);
      out << "\n";
    }
  }
  auto small = "embed(V,32)-res(norm-attn(2))-res(norm-dense(64)-gelu-"
               "dense(32))-norm-dense(V)";
  auto count = [&](const std::string& name) {
    return lumen::test::run({LUMEN_CLI, "train", "text", "--data",
                             text.string(), "--model", small, "--steps", "300",
                             "--eval-every", "100", "--length", "32", "--lr",
                             "3e-3", "--storage", dir, "--name", name});
  };
  auto [code, out] = count("count");
  BOOST_REQUIRE_MESSAGE(code == 0, out);
  // The same seed twice, the same weights to the bit.
  auto again = count("again");
  BOOST_REQUIRE_MESSAGE(again.first == 0, again.second);
  auto weights = [&](const std::string& name, int checkpoint) {
    return read_bytes(fs::path{dir} / name /
                      ("checkpoint_" + std::to_string(checkpoint)) /
                      "model.safetensors");
  };
  BOOST_TEST((weights("count", 2) == weights("again", 2)));
  BOOST_TEST(!weights("count", 2).empty());
  BOOST_TEST(has(out, "(27000 bytes, 11 distinct): 2 workers"), out);
  // Each report but the last says how long the rest will take.
  BOOST_TEST(has(out, "all-reduce waited"), out);
  BOOST_TEST(has(out, "  ETA 0:0"), out);
  auto rows = lines_of(fs::path{dir} / "count" / "metrics.csv");
  BOOST_REQUIRE_EQUAL(rows.size(), 4u); // a header and 3 reports
  BOOST_TEST(rows[0] == "step,loss,val_loss,train_bpc,val_bpc,seconds,"
                        "chars_per_second,exposed_allreduce_seconds");
  auto first = std::stod(cells(rows[1])[4]),
       last = std::stod(cells(rows[3])[4]);
  BOOST_TEST(last < first, out);
  // The digits follow from those before them: far below log2(11) = 3.46.
  BOOST_TEST(last < 1.0, out);
  // The plot is of bits against steps, to the last.
  auto bytes = read_bytes(fs::path{dir} / "count" / "metrics.svg");
  std::string svg{bytes.begin(), bytes.end()};
  BOOST_TEST(has(svg, ">step</text>"), svg);
  BOOST_TEST(has(svg, ">300</text>"), svg);
  // Sampled from its checkpoint, it counts on.
  auto checkpoint = (fs::path{dir} / "count" / "checkpoint_2").string();
  std::tie(code, out) = lumen::test::run(
    {LUMEN_CLI, "train", "text", "--sample", checkpoint, "--prompt",
     "34567890\n4567", "--chars", "4", "--temperature", "0.05"});
  BOOST_TEST(code == 0, out);
  BOOST_TEST(has(out, "34567890\n45678901"), out);

  // Resumed from its second checkpoint, the run ends where the
  // uninterrupted one did, to the bit: the windows of a step, Adam's
  // moments and its step count all go on as they would have.
  auto resume_from = (fs::path{dir} / "count" / "checkpoint_1").string();
  std::tie(code, out) = lumen::test::run(
    {LUMEN_CLI,   "train",    "text",    "--data",  text.string(),
     "--model",   small,      "--steps", "300",     "--eval-every",
     "100",       "--length", "32",      "--lr",    "3e-3",
     "--storage", dir,        "--name",  "resumed", "--resume",
     resume_from});
  BOOST_REQUIRE_MESSAGE(code == 0, out);
  BOOST_TEST(has(out, "(200 steps done)"), out);
  BOOST_TEST((weights("resumed", 0) == weights("count", 2)));
  // Decoupled weight decay keeps the matrices small; the text is learned
  // all the same.
  std::tie(code, out) =
    lumen::test::run({LUMEN_CLI,     "train",        "text", "--data",
                      text.string(), "--model",      small,  "--steps",
                      "300",         "--eval-every", "100",  "--length",
                      "32",          "--lr",         "3e-3", "--weight-decay",
                      "1",           "--storage",    dir,    "--name",
                      "decayed"});
  BOOST_REQUIRE_MESSAGE(code == 0, out);
  auto matrix_squares = [&](const std::string& name) {
    auto file = lumen::ml::load_model_file(
      (fs::path{dir} / name / "checkpoint_2" / "model.safetensors").string());
    auto net = lumen::ml::make_model(file.spec);
    double sum = 0;
    for (auto& t : static_cast<lumen::nn::sequential&>(*net).tensors())
      for (auto i = t.range.begin; t.shape.size() >= 2 && i < t.range.end; ++i)
        sum += double(file.params[i]) * file.params[i];
    return sum;
  };
  BOOST_TEST(matrix_squares("decayed") < 0.8 * matrix_squares("count"));
  auto decayed = lines_of(fs::path{dir} / "decayed" / "metrics.csv");
  BOOST_REQUIRE_EQUAL(decayed.size(), 4u);
  BOOST_TEST(std::stod(cells(decayed[3])[4]) < 1.0, out);
  // A text of as many bytes, other ones: its tokens would mean others.
  auto letters = fs::path{dir} / "letters.txt";
  {
    std::ofstream out{letters};
    for (int i = 0; i < 3000; ++i)
      out << "abcdefghij\n";
  }

  // A checkpoint of before Adam's moments were kept: refused before any
  // worker starts, not after.
  auto no_moments = fs::path{dir} / "no_moments.safetensors";
  {
    auto file = lumen::ml::load_model_file(resume_from + "/model.safetensors");
    file.extra.clear();
    lumen::ml::save_model_file(no_moments.string(), file);
  }

  // Bad input: named, nothing trained.
  for (auto& [flags, says, exit] :
       std::vector<std::tuple<std::vector<std::string>, std::string, int>>{
         {{"--data", LUMEN_CLI}, "it is not text", 1},
         {{"--data", dir + "/none"}, "no such file or folder", 1},
         {{"--data", text.string(), "--model", "embed(V,8)-dense(5)"},
          "ends in 5 outputs a position where the text has 11 tokens",
          2},
         {{"--data", text.string(), "--model", "embed(V,8)-attn(3)-dense(V)"},
          "8 values a position do not split into 3 heads",
          2},
         {{"--data", text.string(), "--model", "gpt-wid"},
          "no model \"gpt-wid\": the presets are gpt and gpt-wide",
          2},
         {{"--sample", dir + "/count.txt"}, "not a", 1},
         {{"--data", text.string(), "--model", small, "--length", "32",
           "--steps", "200", "--resume", resume_from},
          "has 200 steps done already; ask for more with --steps",
          2},
         {{"--data", letters.string(), "--model", small, "--length", "32",
           "--resume", resume_from},
          "trained on a text of other bytes (11 distinct, this one 11)",
          2},
         {{"--data", text.string(), "--model", small, "--length", "32",
           "--resume", dir + "/count.txt"},
          "not a safetensors file",
          1},
         {{"--data", text.string(), "--model", small, "--length", "32",
           "--resume", no_moments.string()},
          "has no optimizer.adam_m of",
          1},
         {{"--sample", checkpoint, "--prompt", "x"},
          "is not in the model's vocabulary",
          2}}) {
    std::vector<std::string> argv{LUMEN_CLI, "train",  "text", "--storage",
                                  dir,       "--name", "bad"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    auto [c, said] = lumen::test::run(argv);
    BOOST_TEST(c == exit, flags[0] << ": " << said);
    BOOST_TEST(has(said, says), said);
  }
  BOOST_TEST(!fs::exists(fs::path{dir} / "bad"));
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(the_text_presets_are_the_models_the_guide_counts) {
  // Fortunes' 114 tokens: gpt over windows of 64, gpt-wide over 128 (each
  // position has its embedding), as training.md gives them.
  namespace tr = lumen::train;
  BOOST_TEST(
    lumen::ml::make_model(tr::text_model("gpt", 114, 64))->num_params() ==
    830834u);
  auto wide = lumen::ml::make_model(tr::text_model("gpt-wide", 114, 128));
  BOOST_TEST(wide->num_params() == 3250802u);
  BOOST_TEST(wide->name().find("embed(114,256)-res(norm-attn(8)-dropout(10))"
                               "-res(norm-dense(1024)-gelu-dense(256)-"
                               "dropout(10))") != std::string::npos,
             wide->name());
}

BOOST_AUTO_TEST_CASE(the_gpt_trains_on_debians_fortunes) {
  // The real text, a few steps: the preset builds, the data set loads, the
  // loss falls from where a guess starts (log2 of the vocabulary).
  auto dir = lumen::test::fresh_dir("train-text");
  auto [code, out] = lumen::test::run(
    {LUMEN_CLI, "train", "text", "--steps", "30", "--eval-every", "30",
     "--batch", "4", "--storage", dir, "--name", "fortunes"});
  BOOST_REQUIRE_MESSAGE(code == 0, out);
  BOOST_TEST(has(out, "(830834 parameters) on /usr/share/games/fortunes"), out);
  auto rows = lines_of(fs::path{dir} / "fortunes" / "metrics.csv");
  BOOST_REQUIRE_EQUAL(rows.size(), 2u);
  BOOST_TEST(std::stod(cells(rows[1])[4]) < 6.0, out);
  fs::remove_all(dir);
}
