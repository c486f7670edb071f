// The project's own thin C API over llama.h, compiled to WebAssembly by scripts/build-llamacpp.mjs.
//
// Invariants:
// - One model and one context at a time (a browser tab's worth of memory holds one).
// - The caller drives generation one step at a time (decode a batch, sample a token), so an
//   abort lands between steps, and the prompt goes in as token ids: text the caller tokenized
//   as text never becomes a control token here.
// - Nothing here allocates per token beyond the candidate array, which is reused.
// - An embedding model's context pools each input as its GGUF says (mean, CLS or last token)
//   and takes many inputs, each a sequence of its own, in one decode (`wi_embed`).
// - A token's grammar step is bounded: the grammar is applied to the candidates a slice at a
//   time, and between slices the step ends past its time budget or on an abort (read from shared
//   memory where the build has it); llama.cpp's matcher is built to refuse a grammar that would
//   keep more parses at once than it can follow (scripts/build-llamacpp.mjs: withGrammarBound).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include <emscripten/emscripten.h>

#include "ggml-cpu.h"
#include "llama.h"

namespace {

llama_model * model = nullptr;
llama_context * context = nullptr;
const llama_vocab * vocab = nullptr;
ggml_threadpool * threadpool = nullptr;
llama_sampler * chain = nullptr;
llama_sampler * grammar = nullptr;
llama_batch batch = {};
int batch_capacity = 0;
int thread_count = 1;
std::vector<llama_token_data> candidates;
std::string last_error;
// llama.cpp's log, the last few kilobytes: a failed load's reason is in it.
std::string log_tail;

void keep_log(ggml_log_level level, const char * text, void *) {
    if (level == GGML_LOG_LEVEL_DEBUG) return;
    log_tail += text;
    if (log_tail.size() > 8192) log_tail.erase(0, log_tail.size() - 4096);
}

int fail(const std::string & message) {
    last_error = message;
    return -1;
}

void free_sampler() {
    if (chain) llama_sampler_free(chain);
    if (grammar) llama_sampler_free(grammar);
    chain = nullptr;
    grammar = nullptr;
}

void fill_candidates(const float * logits) {
    const int n_vocab = llama_vocab_n_tokens(vocab);
    candidates.resize(n_vocab);
    for (int id = 0; id < n_vocab; id++) candidates[id] = llama_token_data{id, logits[id], 0.0f};
}

// Whether the caller asked the step under way to stop: set in shared memory by the page, where
// the page is cross-origin isolated; otherwise never (the budget bounds the step).
EM_JS(int, wi_abort_requested, (), { return Module["abortRequested"] ? Module["abortRequested"]() : 0; });

// Candidates the grammar is applied to between two looks at the clock and the abort flag.
constexpr size_t grammar_slice = 4096;

// The grammar applied to every candidate, a slice at a time: 0, or -2 past `deadline`, -3 on an abort.
int apply_grammar(llama_token_data_array & array, double deadline) {
    for (size_t start = 0; start < array.size; start += grammar_slice) {
        if (emscripten_get_now() > deadline) return -2;
        if (wi_abort_requested()) return -3;
        llama_token_data_array slice = {array.data + start, std::min(grammar_slice, array.size - start), -1, false};
        llama_sampler_apply(grammar, &slice);
    }
    return 0;
}

llama_token pick(llama_token_data_array & array) {
    llama_sampler_apply(chain, &array);
    return array.data[array.selected].id;
}

bool grammar_allows(llama_token token) {
    llama_token_data single = {token, 1.0f, 0.0f};
    llama_token_data_array array = {&single, 1, -1, false};
    llama_sampler_apply(grammar, &array);
    return !std::isinf(single.logit);
}

// Log probabilities from the raw logits, as llama.cpp's server reports them: the chosen token's,
// then the `n_alternatives` most likely tokens', best first. One pass for the normaliser and one
// that keeps the best few in order (an insertion only when a logit beats the worst kept).
void write_logprobs(const float * logits, llama_token chosen, int n_alternatives, int32_t * ids, float * logprobs) {
    const int n_vocab = llama_vocab_n_tokens(vocab);
    float max_logit = -INFINITY;
    for (int id = 0; id < n_vocab; id++) max_logit = std::fmax(max_logit, logits[id]);
    double sum = 0;
    for (int id = 0; id < n_vocab; id++) sum += std::exp(double(logits[id] - max_logit));
    const float log_sum = float(std::log(sum)) + max_logit;
    ids[0] = chosen;
    logprobs[0] = logits[chosen] - log_sum;
    int32_t * best = ids + 1;
    int kept = 0;
    for (int id = 0; id < n_vocab && n_alternatives > 0; id++) {
        if (kept == n_alternatives && logits[id] <= logits[best[kept - 1]]) continue;
        int at = kept < n_alternatives ? kept++ : kept - 1;
        while (at > 0 && logits[best[at - 1]] < logits[id]) {
            best[at] = best[at - 1];
            at--;
        }
        best[at] = id;
    }
    for (int k = 0; k < kept; k++) logprobs[1 + k] = logits[best[k]] - log_sum;
}

}  // namespace

extern "C" {

EMSCRIPTEN_KEEPALIVE const char * wi_error() { return last_error.c_str(); }

EMSCRIPTEN_KEEPALIVE const char * wi_log() { return log_tail.c_str(); }

EMSCRIPTEN_KEEPALIVE const char * wi_system_info() { return llama_print_system_info(); }

EMSCRIPTEN_KEEPALIVE void wi_free() {
    free_sampler();
    if (batch_capacity) llama_batch_free(batch);
    batch_capacity = 0;
    if (context) llama_free(context);
    if (model) llama_model_free(model);
    if (threadpool) ggml_threadpool_free(threadpool);
    context = nullptr;
    model = nullptr;
    vocab = nullptr;
    threadpool = nullptr;
}

// Up to this many inputs are embedded in one decode, each a sequence of its own.
constexpr int embedding_sequences = 64;

// `paths` is the model's files, one per line (a split model's parts in order). With `embeddings`,
// a context that pools: `n_batch` tokens a decode, as many sequences as `embedding_sequences`.
EMSCRIPTEN_KEEPALIVE int wi_load(const char * paths, int n_ctx, int n_batch, int n_threads, int embeddings) {
    wi_free();
    static bool started = false;
    if (!started) {
        llama_log_set(keep_log, nullptr);
        llama_backend_init();
        started = true;
    }
    std::vector<std::string> files;
    for (const char * start = paths; *start;) {
        const char * end = std::strchr(start, '\n');
        files.emplace_back(start, end ? end - start : std::strlen(start));
        start = end ? end + 1 : start + std::strlen(start);
    }
    std::vector<const char *> names;
    for (auto & file : files) names.push_back(file.c_str());
    llama_model_params model_params = llama_model_default_params();
    model_params.load_mode = LLAMA_LOAD_MODE_NONE;
    model_params.lazy_mode = LLAMA_LAZY_MODE_OFF;
    model_params.n_gpu_layers = 0;
    log_tail.clear();
    model = llama_model_load_from_splits(names.data(), names.size(), model_params);
    if (!model) return fail("llama.cpp could not load the model: " + log_tail);
    vocab = llama_model_get_vocab(model);
    llama_context_params context_params = llama_context_default_params();
    context_params.n_ctx = n_ctx;
    context_params.n_batch = n_batch;
    context_params.n_ubatch = n_batch;
    context_params.n_seq_max = 1;
    if (embeddings) {
        // A non-causal model (BERT) needs each input whole in one micro-batch, and every
        // sequence shares the one window of positions.
        context_params.embeddings = true;
        context_params.n_seq_max = embedding_sequences;
        context_params.kv_unified = true;
    }
    context_params.n_threads = n_threads;
    context_params.n_threads_batch = n_threads;
    context_params.no_perf = true;
    context = llama_init_from_model(model, context_params);
    if (!context) {
        wi_free();
        return fail("llama.cpp could not make a context of " + std::to_string(n_ctx) + " tokens: " + log_tail);
    }
    const enum llama_pooling_type pooling = llama_pooling_type(context);
    if (embeddings && (pooling == LLAMA_POOLING_TYPE_NONE || pooling == LLAMA_POOLING_TYPE_RANK)) {
        wi_free();
        return fail(pooling == LLAMA_POOLING_TYPE_NONE
                        ? "the GGUF says no pooling (its <architecture>.pooling_type is missing or none), so it gives a vector per token, not per text: write the pooling its model card names (1 mean, 2 CLS, 3 last) into the GGUF"
                        : "the GGUF is a reranker (pooling_type rank), which scores pairs of texts and embeds none");
    }
    // One pool for the model's life: ggml would otherwise start and join its threads on every decode.
    thread_count = n_threads;
    if (n_threads > 1) {
        ggml_threadpool_params pool = ggml_threadpool_params_default(n_threads);
        threadpool = ggml_threadpool_new(&pool);
        llama_attach_threadpool(context, threadpool, threadpool);
    }
    batch = llama_batch_init(n_batch, 0, 1);
    batch_capacity = n_batch;
    return 0;
}

// 0 the vocabulary's size, 1 the context's window, 2 whether a prompt starts with BOS,
// 3 the BOS token, 4 the threads, 5 the batch size, 6 an embedding's size, 7 the pooling
// (llama_pooling_type), 8 the sequences one decode may hold.
EMSCRIPTEN_KEEPALIVE int wi_info(int what) {
    switch (what) {
        case 0: return llama_vocab_n_tokens(vocab);
        case 1: return int(llama_n_ctx(context));
        case 2: return llama_vocab_get_add_bos(vocab) ? 1 : 0;
        case 3: return llama_vocab_bos(vocab);
        case 4: return thread_count;
        case 5: return batch_capacity;
        case 6: return llama_model_n_embd_out(model);
        case 7: return int(llama_pooling_type(context));
        case 8: return int(llama_n_seq_max(context));
        default: return -1;
    }
}

// Text in the model's own vocabulary. `parse_special` only for what may hold control tokens: a
// template's control pieces, and a client's own raw prompt (legacy completions); a message's
// text is tokenized with it off, so a control-token string in it stays text.
EMSCRIPTEN_KEEPALIVE int wi_tokenize(const char * text, int length, int add_special, int parse_special, int32_t * out,
                                     int capacity) {
    return llama_tokenize(vocab, text, length, out, capacity, add_special != 0, parse_special != 0);
}

// The token's bytes; control tokens render as nothing, as llama.cpp's server writes them.
EMSCRIPTEN_KEEPALIVE int wi_piece(int token, char * out, int capacity) {
    return llama_token_to_piece(vocab, token, out, capacity, 0, false);
}

EMSCRIPTEN_KEEPALIVE int wi_is_end(int token) { return llama_vocab_is_eog(vocab, token) ? 1 : 0; }

// Drops the cached positions from `keep` on, so the next decode continues a shared prefix.
EMSCRIPTEN_KEEPALIVE int wi_forget(int keep) {
    return llama_memory_seq_rm(llama_get_memory(context), 0, keep, -1) ? 0 : -1;
}

// Decodes `count` tokens (at most the batch size) at positions `first`…; logits for the last one.
EMSCRIPTEN_KEEPALIVE int wi_decode(const int32_t * tokens, int count, int first) {
    if (count > batch_capacity) return fail("a batch larger than the context's batch size");
    batch.n_tokens = count;
    for (int i = 0; i < count; i++) {
        batch.token[i] = tokens[i];
        batch.pos[i] = first + i;
        batch.n_seq_id[i] = 1;
        batch.seq_id[i][0] = 0;
        batch.logits[i] = i == count - 1;
    }
    const int status = llama_decode(context, batch);
    if (status != 0) return fail("llama_decode failed with status " + std::to_string(status) + ": " + log_tail);
    return 0;
}

// Embeds `n_seqs` inputs in one decode: `tokens` holds them one after another, `lengths` each
// one's count. Writes each input's pooled vector (`wi_info(6)` floats) into `out`, in order.
EMSCRIPTEN_KEEPALIVE int wi_embed(const int32_t * tokens, const int32_t * lengths, int n_seqs, float * out) {
    if (n_seqs < 1 || n_seqs > int(llama_n_seq_max(context))) return fail("more inputs than one decode holds");
    int total = 0;
    for (int s = 0; s < n_seqs; s++) total += lengths[s];
    if (total > batch_capacity) return fail("more tokens than the context's batch size");
    // Each decode starts from nothing: no input sees another's, or an earlier one's.
    if (llama_memory_t memory = llama_get_memory(context)) llama_memory_clear(memory, true);
    batch.n_tokens = total;
    for (int s = 0, at = 0; s < n_seqs; s++) {
        for (int i = 0; i < lengths[s]; i++, at++) {
            batch.token[at] = tokens[at];
            batch.pos[at] = i;
            batch.n_seq_id[at] = 1;
            batch.seq_id[at][0] = s;
            batch.logits[at] = true;
        }
    }
    const int status = llama_decode(context, batch);
    if (status != 0) return fail("llama_decode failed with status " + std::to_string(status) + ": " + log_tail);
    const int n_embd = llama_model_n_embd_out(model);
    for (int s = 0; s < n_seqs; s++) {
        const float * vector = llama_get_embeddings_seq(context, s);
        if (!vector) return fail("llama.cpp gave no pooled vector for input " + std::to_string(s));
        std::memcpy(out + size_t(s) * n_embd, vector, sizeof(float) * n_embd);
    }
    return 0;
}

// The sampler for one request. A temperature of 0 is greedy. `grammar_text` empty means none;
// a grammar llama.cpp cannot parse is an error, named by its log.
EMSCRIPTEN_KEEPALIVE int wi_sampler(float temperature, float top_p, float presence, float frequency, uint32_t seed,
                                    const int32_t * bias_ids, const float * bias_values, int bias_count,
                                    const char * grammar_text) {
    free_sampler();
    std::vector<llama_logit_bias> biases;
    for (int i = 0; i < bias_count; i++) biases.push_back({bias_ids[i], bias_values[i]});
    const int n_vocab = llama_vocab_n_tokens(vocab);
    chain = llama_sampler_chain_init(llama_sampler_chain_default_params());
    if (bias_count) llama_sampler_chain_add(chain, llama_sampler_init_logit_bias(n_vocab, bias_count, biases.data()));
    if (presence != 0 || frequency != 0)
        llama_sampler_chain_add(chain, llama_sampler_init_penalties(n_vocab, int(llama_n_ctx(context)), 1.0f, frequency, presence));
    if (temperature <= 0) {
        llama_sampler_chain_add(chain, llama_sampler_init_greedy());
    } else {
        llama_sampler_chain_add(chain, llama_sampler_init_temp(temperature));
        if (top_p < 1) llama_sampler_chain_add(chain, llama_sampler_init_top_p(top_p, 1));
        llama_sampler_chain_add(chain, llama_sampler_init_dist(seed));
    }
    if (grammar_text && *grammar_text) {
        log_tail.clear();
        try {
            grammar = llama_sampler_init_grammar(vocab, grammar_text, "root");
        } catch (const std::exception & error) {
            free_sampler();
            return fail(error.what());
        }
        if (!grammar) {
            free_sampler();
            return fail("llama.cpp could not parse the grammar: " + log_tail);
        }
    }
    return 0;
}

// Samples the next token from the last decode's logits and accepts it. The chain samples first;
// only when the grammar refuses that token is the grammar applied to every candidate and the
// chain run again (llama.cpp's own order: most tokens pass, and checking one is cheap).
// Writes the token's log probability and `n_alternatives` alternatives into ids/logprobs.
// Returns the token, or -1 on an error, -2 past `budget_ms` in the grammar's step, -3 on an abort.
EMSCRIPTEN_KEEPALIVE int wi_sample(int n_alternatives, int32_t * ids, float * logprobs, double budget_ms) {
    const double deadline = emscripten_get_now() + budget_ms;
    try {
        const float * logits = llama_get_logits_ith(context, -1);
        fill_candidates(logits);
        llama_token_data_array array = {candidates.data(), candidates.size(), -1, false};
        llama_token token = pick(array);
        if (grammar && !grammar_allows(token)) {
            fill_candidates(logits);
            array = {candidates.data(), candidates.size(), -1, false};
            const int status = apply_grammar(array, deadline);
            if (status != 0) return status;
            token = pick(array);
            if (std::isinf(array.data[array.selected].logit)) return fail("the grammar allows no token here");
        }
        if (grammar) llama_sampler_accept(grammar, token);
        llama_sampler_accept(chain, token);
        if (n_alternatives >= 0) write_logprobs(logits, token, n_alternatives, ids, logprobs);
        return token;
    } catch (const std::exception & error) {
        return fail(error.what());
    }
}

}  // extern "C"
