#include "nn/spec.hpp"

#include <algorithm>
#include <cctype>
#include <utility>

#include "lumen/errors.hpp"
#include "lumen/nn/sequential.hpp"

namespace lumen::nn {

const char* const layer_forms =
  "the layers are linear(N), dense(N), conv(C,K[,P]), pool(K), relu, gelu, "
  "dropout(P), flatten, embed(V,D), norm, attn(H) and res(...), joined by "
  "'-'";

namespace {

/// What each kind of layer computes on h, its input, in the words of a
/// checkpoint's "forward": the numbers a reader needs to rebuild it.
constexpr std::pair<const char*, const char*> layer_meanings[] = {
  {"conv", "conv(C,K[,P]) a cross-correlation, stride 1, P zeros of padding "
           "each side (default 0), weight [C, input channels, K, K], plus "
           "bias"},
  {"pool", "pool(K) max over K x K windows, stride K"},
  {"linear", "linear(N) flatten(h) @ weight [inputs, N] + bias"},
  {"dense", "dense(N) at each position, its D values @ weight [D, N] + bias"},
  {"relu", "relu max(h, 0)"},
  {"gelu", "gelu h * Phi(h), exact"},
  {"flatten", "flatten the values as one row"},
  {"dropout", "dropout(P) the identity (it drops values in training only)"},
  {"embed", "embed(V,D) on T token ids (an input of 1xTx1): at position t, "
            "row id of token [V, D] plus row t of position [T, D]"},
  {"norm", "norm at each position, (h - mean) / sqrt(variance + 1e-5) * "
           "weight + bias, the mean and variance (divided by D) of its D "
           "values"},
  {"attn", "attn(H) causal self-attention at each position: [q k v] = h @ "
           "qkv.weight [D, 3D] + qkv.bias; head j takes columns j*D/H to "
           "(j+1)*D/H - 1 of each of q, k and v; position t attends to "
           "positions 0 to t, softmax(q k^T / sqrt(D/H)) v; the heads' "
           "outputs side by side @ out.weight [D, D] + out.bias"},
  {"res", "res(...) h plus what the layers inside give on h; res( and its "
          ") are layers of their own in the numbering"},
};

} // namespace

std::vector<parsed_layer> parse(const std::string& spec) {
  auto fail = [&](size_t at, const std::string& what) -> usage_error {
    return usage_error("model spec \"" + spec + "\": at character " +
                       std::to_string(at + 1) + ", " + what + "; " +
                       layer_forms);
  };
  std::vector<parsed_layer> out;
  std::vector<size_t> open; // where each unclosed "res(" starts
  size_t i = 0;
  for (;;) {
    parsed_layer l;
    l.at = i;
    l.place = out.size();
    while (i < spec.size() && std::isalpha(static_cast<unsigned char>(spec[i])))
      l.name += spec[i++];
    if (l.name.empty())
      throw fail(i, "expected a layer's name");
    if (l.name == "res") {
      if (i == spec.size() || spec[i] != '(')
        throw fail(i, "expected '(' and the layers res adds its input to");
      ++i;
      open.push_back(l.at);
      out.push_back(std::move(l));
      continue;
    }
    if (i < spec.size() && spec[i] == '(') {
      ++i;
      for (;;) {
        size_t digits = 0, value = 0;
        while (i < spec.size() &&
               std::isdigit(static_cast<unsigned char>(spec[i])) &&
               digits < 9) {
          value = value * 10 + size_t(spec[i++] - '0');
          ++digits;
        }
        if (digits == 0)
          throw fail(i, "expected a number");
        l.args.push_back(value);
        if (i < spec.size() && spec[i] == ',') {
          ++i;
          continue;
        }
        if (i < spec.size() && spec[i] == ')') {
          ++i;
          break;
        }
        throw fail(i, "expected ',' or ')'");
      }
    }
    out.push_back(std::move(l));
    for (; i < spec.size() && spec[i] == ')'; ++i) {
      if (open.empty())
        throw fail(i, "a ')' that closes no res(");
      open.pop_back();
      out.push_back({")", {}, i, out.size()});
    }
    if (i == spec.size()) {
      if (!open.empty())
        throw fail(open.back(), "a res( that is never closed with ')'");
      return out;
    }
    if (spec[i] != '-')
      throw fail(i, "expected '-' before the next layer");
    ++i;
  }
}

std::string describe_layers(const std::string& spec) {
  std::string out = "numbered from 0 in the spec's order, each layer's "
                    "tensors named layers.<number>.<tensor>";
  std::vector<std::string> told;
  for (auto& l : parse(spec)) {
    if (std::find(told.begin(), told.end(), l.name) != told.end())
      continue;
    for (auto& [name, meaning] : layer_meanings)
      if (l.name == name)
        out += std::string{"; "} + meaning;
    told.push_back(l.name);
  }
  return out;
}

} // namespace lumen::nn
