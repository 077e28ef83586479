#pragma once

// `lumen train text`: a character-level GPT (lumen::nn layers: token and
// position embeddings, blocks of causal self-attention and a GELU MLP,
// each a residual behind its layer normalisation) trained data-parallel
// on a text file or a folder of them, the gradient all-reduced on the
// ring bucket by bucket while backward runs; its validation loss in bits
// per character; text sampled from a checkpoint. The train loop is
// registered as `text_loop`, so every node of a cluster started with the
// `lumen` command can run it.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "lumen/ml/model_file.hpp"
#include "lumen/ml/models.hpp"
#include "lumen/ml/text.hpp"
#include "lumen/train/trainer.hpp"

namespace lumen::train {

/// The loop's registered name. Its settings: "data" (a text file or
/// folder), "model" (a preset or a layer spec: text_model), "length" (tokens
/// a window), "batch" (windows a step and worker), "steps" (the run's
/// total), "eval_every" (steps between reports), "lr" (Adam, warmed up
/// over the first 100 steps, then decayed to a tenth on a cosine),
/// "weight_decay" (decoupled, as AdamW's, on the matrices), "seed". Rank 0
/// reports train and validation loss (bits per character) every
/// eval_every steps, with a checkpoint holding model.safetensors, Adam's
/// moments and the vocabulary in its metadata; a run resumed from it
/// (a restart, or --resume) goes on as the uninterrupted one to the bit.
inline constexpr const char* text_loop = "lumen.train.text";

/// Debian's fortunes (apt-get install fortunes): 2.6 MB of text.
inline constexpr const char* fortunes_dir = "/usr/share/games/fortunes";

/// `model` over windows of `length` tokens of `vocab`: "gpt" (4 blocks of
/// 4 heads, 128 wide, an MLP of 512: about 800,000 parameters), "gpt-wide"
/// (4 blocks of 8 heads, 256 wide, an MLP of 1024: about 3.2 million), or
/// a layer spec of nn::sequential's, where V stands for the vocabulary's size
/// ("embed(V,64)-res(norm-attn(2))-norm-dense(V)"). Throws `usage_error`
/// naming what does not parse or fit.
ml::model_spec text_model(const std::string& model, size_t vocab,
                          size_t length);

/// `count` tokens sampled after `prompt` (which may be empty) by the model
/// of `file` (a checkpoint's model.safetensors, its vocabulary in its
/// metadata), each drawn from softmax(logits / temperature) with `seed`.
/// Throws `data_error` for a file without a vocabulary, `usage_error`
/// for a prompt byte not in it.
std::string sample_text(const std::string& file, const std::string& prompt,
                        size_t count, double temperature, uint64_t seed);

/// Throws `usage_error` unless the checkpoint `file` was trained on a
/// text of the distinct bytes `vocab` (its tokens mean the same bytes),
/// `data_error` if it has no vocabulary or no Adam moments to go on with.
void check_resumable_text(const ml::model_file& file, const std::string& vocab);

namespace detail {
bool text_registered();
inline const bool text_linked = text_registered();
} // namespace detail

} // namespace lumen::train
