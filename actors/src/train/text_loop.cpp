// The character-level language model's train loop of `lumen train text`:
// every worker draws its own windows of the training text, the mean
// gradient is all-reduced bucket by bucket during backward, and every
// eval_every steps the validation text's loss is evaluated in shares and
// reported, with a checkpoint, in bits per character.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>

#include "lumen/collective/collective.hpp"
#include "lumen/ml/model_file.hpp"
#include "lumen/ml/optimizer.hpp"
#include "lumen/nn/sequential.hpp"
#include "lumen/train/data_parallel.hpp"
#include "lumen/train/fashion_mnist.hpp"
#include "lumen/train/text.hpp"

#include "train/loop_checks.hpp"

namespace lumen::train {

namespace {

using clock_type = std::chrono::steady_clock;

/// Validation windows, spread evenly over the held-out text: a fifth of
/// fortunes' at 128 tokens a window, so that the figure hangs on no few
/// fortunes.
constexpr size_t validation_windows = 384;

/// Adam's first and second moments in a checkpoint, as opt.state() gives
/// them.
constexpr const char* optimizer_tensors[] = {"optimizer.adam_m",
                                             "optimizer.adam_v"};

/// The checkpoint's Adam moments, in optimizer_tensors' order. Throws
/// `data_error` unless each is there with a value a weight (checkpoints
/// written before they were kept have none).
std::vector<const ml::tensor*> adam_moments(const ml::model_file& file) {
  std::vector<const ml::tensor*> out;
  for (auto* name : optimizer_tensors) {
    auto t = file.extra.find(name);
    if (t == file.extra.end() || t->second.numel() != file.params.size())
      throw ml::data_error("the checkpoint has no " + std::string{name} +
                             " of " + std::to_string(file.params.size()) +
                             " values (checkpoints before Lumen kept Adam's "
                             "moments have none): it cannot go on as its run "
                             "would have; start a new run",
                           errc::bad_file);
    out.push_back(&t->second);
  }
  return out;
}

std::string hex_of(const std::string& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes)
    out += {digits[c >> 4], digits[c & 15]};
  return out;
}

std::string bytes_of(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    out += char(std::stoi(hex.substr(i, 2), nullptr, 16));
  return out;
}

/// The bytes the model of `file` (named `name` in errors) was trained on,
/// its tokens' meanings. Throws `data_error` if it has none.
std::string vocab_of(const ml::model_file& file, const std::string& name) {
  auto vocab = file.metadata.find("vocab");
  if (vocab == file.metadata.end() || file.spec.kind != "sequential")
    throw ml::data_error(name + ": no \"vocab\" in its metadata; it is not a "
                                "checkpoint of lumen train text",
                         errc::bad_file);
  return bytes_of(vocab->second);
}

/// The tensors weight decay shrinks: the matrices (the layers' weights and
/// the embedding), not the biases and the norms' gains and shifts, whose
/// pull toward zero would only fight what they are for.
std::vector<ml::param_range> decayed_tensors(const ml::model& net) {
  std::vector<ml::param_range> out;
  for (auto& t : static_cast<const nn::sequential&>(net).tensors())
    if (t.shape.size() >= 2)
      out.push_back(t.range);
  return out;
}

/// Decoupled weight decay, as torch.optim.AdamW's: the weights shrink by
/// `rate` of themselves apart from the gradient's step, since Adam would
/// scale an L2 term in the gradient down wherever gradients are large.
void decay_weights(float* w, const std::vector<ml::param_range>& ranges,
                   float rate) {
  if (rate == 0)
    return;
  for (auto& r : ranges)
    for (auto i = r.begin; i < r.end; ++i)
      w[i] -= rate * w[i];
}

void loop(const loop_config& cfg) {
  auto& ctx = get_context();
  auto rank = size_t(ctx.world_rank), world = size_t(ctx.world_size);
  auto text = ml::load_text(text_or(cfg, "data", fortunes_dir));
  auto length = size_t(value_or(cfg, "length", 64));
  auto spec =
    text_model(text_or(cfg, "model", "gpt"), text.vocab.size(), length);
  auto net_ptr = ml::make_model(spec);
  auto& net = *net_ptr;
  auto split = ml::split_for_validation(text.tokens);
  if (split.train.size() < 2 * (length + 1) ||
      split.validation.size() < length + 2)
    throw usage_error("a text of " + std::to_string(text.tokens.size()) +
                      " bytes for windows of " + std::to_string(length) +
                      ": too short to train on and validate; give more text "
                      "or a smaller --length");
  auto seed = uint64_t(value_or(cfg, "seed", 1));
  auto w = net.init(ml::derive_seed(seed, 0));
  auto lr = float(value_or(cfg, "lr", 1e-3));
  ml::optimizer opt{{ml::optimizer_kind::adam, lr}, w.size()};
  auto decay = float(value_or(cfg, "weight_decay", 0));
  auto matrices = decayed_tensors(net);
  auto steps = size_t(value_or(cfg, "steps", 2000));
  auto every = std::max<size_t>(1, size_t(value_or(cfg, "eval_every", 200)));
  auto batch = size_t(value_or(cfg, "batch", 16));
  size_t first = 0;
  if (auto& from = get_checkpoint()) {
    auto file = ml::parse_model_file(from->files.at(model_file_name),
                                     "the checkpoint's model.safetensors");
    check_same_model(file.spec, spec);
    first = std::stoul(file.metadata.at("steps_done"));
    // Adam's moments and step count too, so that the run goes on as the
    // uninterrupted one would have, to the bit.
    auto state = opt.state();
    auto moments = adam_moments(file);
    for (size_t k = 0; k < state.size(); ++k)
      *state[k] = moments[k]->to_vector<float>();
    opt.set_steps(first);
    w = std::move(file.params);
  }
  bucketed_allreduce sync{net, ctx.group};
  std::vector<float> grad(w.size());
  std::uniform_int_distribution<size_t> start_at{0, split.train.size() -
                                                      length - 2};
  auto since = clock_type::now();
  auto interval = clock_type::now();
  double loss = 0, exposed = 0;
  size_t done_here = 0;
  // [step]
  for (auto step = first; step < steps; ++step) {
    // Each rank's windows of a step are drawn from a stream of their own,
    // so that a run resumed at any step draws what the uninterrupted one
    // did.
    std::mt19937_64 gen{ml::derive_seed(ml::derive_seed(seed, 1 + rank), step)};
    std::vector<size_t> starts(batch);
    for (auto& s : starts)
      s = start_at(gen);
    auto windows = ml::text_windows(split.train, starts, length);
    auto step_loss =
      sync.loss_and_mean_gradient(w.data(), windows, grad.data());
    detail::stop_if_diverged(step_loss, grad,
                             "step " + std::to_string(step + 1) + " of " +
                               std::to_string(steps));
    loss += step_loss;
    exposed += sync.last_step().exposed();
    ++done_here;
    // Warm up over 100 steps, then a cosine down to a tenth.
    double scale =
      step < 100
        ? double(step + 1) / 100.0
        : 0.1 + 0.45 * (1 + std::cos(M_PI * double(step) / double(steps)));
    decay_weights(w.data(), matrices, lr * float(scale) * decay);
    opt.step(w.data(), grad.data(), grad.size(), float(scale));
    // [/step]
    auto now = clock_type::now();
    std::chrono::duration<double> took = now - interval;
    if (rank == 0 && now - since > std::chrono::milliseconds(200)) {
      since = now;
      report_progress(
        {{"step", double(step + 1)},
         {"steps", double(steps)},
         {"loss", loss / double(done_here) / M_LN2},
         {"chars_per_second",
          double(done_here * batch * length * world) / took.count()}});
    }
    if ((step + 1) % every != 0 && step + 1 != steps)
      continue;
    // The validation text's windows in shares, the sums all-reduced.
    std::vector<size_t> mine;
    auto room = split.validation.size() - length - 2;
    for (size_t k = rank; k < validation_windows; k += world)
      mine.push_back(k * room / (validation_windows - 1));
    std::vector<float> sums{0, float(mine.size())};
    if (!mine.empty())
      sums[0] =
        net.loss(w.data(), ml::text_windows(split.validation, mine, length)) *
        float(mine.size());
    collective::allreduce(sums, ctx.group);
    std::optional<checkpoint> c;
    if (rank == 0) {
      ml::model_file file{spec, w, {}, {}};
      auto state = opt.state();
      for (size_t k = 0; k < state.size(); ++k)
        file.extra[optimizer_tensors[k]] = ml::tensor::from(*state[k]);
      file.metadata = {{"vocab", hex_of(text.vocab)},
                       {"vocab_encoding", "each token's byte, in hex"},
                       {"length", std::to_string(length)},
                       {"steps_done", std::to_string(step + 1)},
                       {"steps", std::to_string(steps)},
                       {"data", text_or(cfg, "data", fortunes_dir)},
                       {"lr", std::to_string(lr)},
                       {"weight_decay", std::to_string(decay)},
                       {"workers", std::to_string(world)},
                       {"seed", std::to_string(seed)}};
      c.emplace();
      c->files[model_file_name] = ml::model_file_bytes(file);
    }
    auto val = double(sums[0] / sums[1]);
    report({{"step", double(step + 1)},
            {"loss", loss / double(done_here)},
            {"val_loss", val},
            {"train_bpc", loss / double(done_here) / M_LN2},
            {"val_bpc", val / M_LN2},
            {"seconds", took.count()},
            {"chars_per_second",
             double(done_here * batch * length * world) / took.count()},
            {"exposed_allreduce_seconds", exposed}},
           c);
    loss = exposed = 0;
    done_here = 0;
    interval = clock_type::now();
  }
}

} // namespace

ml::model_spec text_model(const std::string& model, size_t vocab,
                          size_t length) {
  // The presets: four blocks of attention and an MLP four times as wide,
  // each closing in dropout where the model is large enough to learn the
  // text by heart.
  auto preset = [](size_t width, size_t heads, const std::string& end) {
    auto w = std::to_string(width);
    auto layers = "embed(V," + w + ")";
    for (int block = 0; block < 4; ++block)
      layers += "-res(norm-attn(" + std::to_string(heads) + ")" + end +
                ")-res(norm-dense(" + std::to_string(4 * width) +
                ")-gelu-dense(" + w + ")" + end + ")";
    return layers + "-norm-dense(V)";
  };
  auto layers = model;
  if (model == "gpt")
    layers = preset(128, 4, "");
  else if (model == "gpt-wide")
    layers = preset(256, 8, "-dropout(10)");
  else if (model.find('(') == std::string::npos)
    throw usage_error("no model \"" + model +
                      "\": the presets are gpt and gpt-wide, or give layers "
                      "such as embed(V,64)-res(norm-attn(2))-norm-dense(V)");
  // V stands for the vocabulary's size.
  std::string spec;
  for (size_t i = 0; i < layers.size(); ++i) {
    bool alone = layers[i] == 'V' && i > 0 &&
                 (layers[i - 1] == '(' || layers[i - 1] == ',');
    spec += alone ? std::to_string(vocab) : std::string(1, layers[i]);
  }
  auto s = ml::sequential_spec(spec, 1, length, 1);
  if (s.classes != vocab)
    throw usage_error("the model \"" + model + "\" ends in " +
                      std::to_string(s.classes) +
                      " outputs a position where "
                      "the text has " +
                      std::to_string(vocab) + " tokens; end it with dense(V)");
  return s;
}

std::string sample_text(const std::string& path, const std::string& prompt,
                        size_t count, double temperature, uint64_t seed) {
  auto file = ml::load_model_file(path);
  ml::text_corpus text;
  text.vocab = vocab_of(file, path);
  auto model = ml::make_model(file.spec);
  auto& net = static_cast<const nn::sequential&>(*model);
  auto length = net.input().height;
  auto tokens = text.encode(prompt);
  if (tokens.empty())
    tokens.push_back(uint8_t(
      text.vocab.find('\n') == std::string::npos ? 0 : text.vocab.find('\n')));
  auto from = tokens.size();
  std::mt19937_64 gen{seed};
  for (size_t n = 0; n < count; ++n) {
    // The last `length` tokens, padded after: causal attention keeps the
    // padding from the positions before it.
    auto at = tokens.size() > length ? tokens.size() - length : 0;
    ml::tensor window{{1, int64_t(length)}};
    std::fill(window.data<float>(), window.data<float>() + length, 0.0f);
    for (size_t t = at; t < tokens.size(); ++t)
      window.data<float>()[t - at] = float(tokens[t]);
    auto logits = net.outputs(file.params.data(), window);
    auto last = logits.data() + (tokens.size() - at - 1) * text.vocab.size();
    std::vector<double> p(text.vocab.size());
    double top = *std::max_element(last, last + p.size());
    for (size_t v = 0; v < p.size(); ++v)
      p[v] = std::exp((last[v] - top) / std::max(temperature, 1e-3));
    tokens.push_back(
      uint8_t(std::discrete_distribution<size_t>{p.begin(), p.end()}(gen)));
  }
  return prompt + text.decode({tokens.begin() + long(from), tokens.end()});
}

void check_resumable_text(const ml::model_file& file,
                          const std::string& vocab) {
  auto theirs = vocab_of(file, "the checkpoint");
  if (theirs != vocab)
    throw usage_error("the checkpoint was trained on a text of other bytes (" +
                      std::to_string(theirs.size()) + " distinct, this one " +
                      std::to_string(vocab.size()) +
                      "): its tokens would mean other bytes; give the --data "
                      "it was trained on");
  adam_moments(file);
}

namespace detail {

bool text_registered() {
  static const bool done = register_train_loop(text_loop, loop);
  return done;
}

} // namespace detail

} // namespace lumen::train
