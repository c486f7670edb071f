#!/usr/bin/env node
/**
 * Builds the real-engine test model: a WebLLM model folder with random weights, shaped by the
 * metadata that the compiled model library embeds, and the real Qwen tokenizer. No model hub
 * is needed; see ../shared/MODELS.md for why each piece is what it is.
 *
 * The model library is looked for, in order, at $WEBLLM_TEST_MODEL_LIB, in ../shared/webllm/,
 * and at its upstream URL; if none gives it, this fails and names all three.
 *
 * Usage: node scripts/test-model.mjs <out-dir>
 * Writes <out-dir>/lib/<library>.wasm and <out-dir>/model/{mlc-chat-config.json, ndarray-cache.json,
 * tensor-cache.json, params_shard_*.bin, tokenizer.json, tokenizer_config.json}.
 */
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, writeFileSync, openSync, writeSync, closeSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { writeTokenizer } from "./tokenizers.mjs";

export const libraryName = "Qwen2-0.5B-Instruct-q4f32_1-ctx4k_cs1k-webgpu.wasm";
const librarySha256 = "338ab000a62274cb47fa0696aa244d4b1d73db4e6f144b429915d1cfe44d2e6a";
const upstreamUrl = `https://raw.githubusercontent.com/mlc-ai/binary-mlc-llm-libs/main/web-llm-models/v0_2_48/${libraryName}`;
const projectRoot = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const seed = 20_261_122;
const shardBytes = 32 * 1024 * 1024;

function sha256(bytes) {
  return createHash("sha256").update(bytes).digest("hex");
}

async function findLibrary() {
  const tried = [];
  const fromEnvironment = process.env.WEBLLM_TEST_MODEL_LIB;
  if (fromEnvironment) {
    if (existsSync(fromEnvironment)) return readFileSync(fromEnvironment);
    tried.push(`$WEBLLM_TEST_MODEL_LIB=${fromEnvironment}: no such file`);
  } else {
    tried.push("$WEBLLM_TEST_MODEL_LIB: not set");
  }
  const shared = resolve(projectRoot, "..", "shared", "webllm", libraryName);
  if (existsSync(shared)) return readFileSync(shared);
  tried.push(`${shared}: no such file`);
  try {
    const response = await fetch(upstreamUrl, { signal: AbortSignal.timeout(60_000) });
    if (response.ok) return Buffer.from(await response.arrayBuffer());
    tried.push(`${upstreamUrl}: HTTP ${response.status}`);
  } catch (error) {
    tried.push(`${upstreamUrl}: ${error.cause?.code ?? error.message}`);
  }
  throw new Error(`The real-engine test model library ${libraryName} could not be found:\n  - ${tried.join("\n  - ")}`);
}

/** The JSON object the library embeds, starting with {"model_type". */
export function embeddedMetadata(library) {
  const start = library.indexOf(Buffer.from('{"model_type"'));
  if (start < 0) throw new Error("the model library embeds no metadata");
  let depth = 0;
  let inString = false;
  for (let index = start; index < library.length; index++) {
    const byte = library[index];
    if (inString) {
      if (byte === 0x5c) index++;
      else if (byte === 0x22) inString = false;
    } else if (byte === 0x22) inString = true;
    else if (byte === 0x7b) depth++;
    else if (byte === 0x7d && --depth === 0) return JSON.parse(library.subarray(start, index + 1).toString("utf8"));
  }
  throw new Error("the model library's metadata is not terminated");
}

/** xorshift128+: seeded, so the same seed always gives the same weights and outputs. */
function generator(seedValue) {
  let s0 = BigInt(seedValue) | 1n;
  let s1 = 0x9e3779b97f4a7c15n;
  const mask = (1n << 64n) - 1n;
  return () => {
    let x = s0;
    const y = s1;
    s0 = y;
    x ^= (x << 23n) & mask;
    s1 = x ^ y ^ (x >> 17n) ^ (y >> 26n);
    return Number(((s1 + y) & mask) >> 32n) >>> 0;
  };
}

const bytesPerElement = { uint32: 4, float32: 4 };

function fill(parameter, next) {
  const count = parameter.shape.reduce((product, size) => product * size, 1);
  const buffer = Buffer.alloc(count * bytesPerElement[parameter.dtype]);
  if (parameter.dtype === "uint32") {
    // Packed 4-bit weights: uniform nibbles. One random word seeds a cheap per-element LCG, so
    // 295 MiB is written in seconds and still depends only on the seed.
    let state = next();
    for (let offset = 0; offset < buffer.length; offset += 4) {
      state = (Math.imul(state, 1_664_525) + 1_013_904_223) >>> 0;
      buffer.writeUInt32LE(state, offset);
    }
  } else if (parameter.name.endsWith("q_scale")) {
    // Uniform nibbles around 7 have a standard deviation of about 4.6: this scale gives
    // weights of standard deviation about 0.02.
    const view = new Float32Array(buffer.buffer, buffer.byteOffset, count);
    view.fill(0.02 / 4.6);
  } else if (/norm/.test(parameter.name)) {
    new Float32Array(buffer.buffer, buffer.byteOffset, count).fill(1);
  } else if (parameter.name.endsWith("bias")) {
    // Zero-filled already.
  } else {
    const view = new Float32Array(buffer.buffer, buffer.byteOffset, count);
    for (let index = 0; index < count; index++) view[index] = (next() / 4_294_967_296 - 0.5) * 0.07;
  }
  return buffer;
}

function chatConfig(metadata) {
  const cache = metadata.kv_cache;
  return {
    version: "0.1.0",
    model_type: metadata.model_type,
    quantization: metadata.quantization,
    model_config: {
      hidden_act: "silu",
      hidden_size: cache.num_attention_heads * cache.head_dim,
      intermediate_size: 4864,
      num_attention_heads: cache.num_attention_heads,
      num_hidden_layers: cache.num_hidden_layers,
      num_key_value_heads: cache.num_key_value_heads,
      head_dim: cache.head_dim,
      rms_norm_eps: 1e-6,
      rope_theta: 1_000_000,
      vocab_size: 151_936,
      tie_word_embeddings: true,
      context_window_size: metadata.context_window_size,
      prefill_chunk_size: metadata.prefill_chunk_size,
      tensor_parallel_shards: 1,
      dtype: "float32",
    },
    vocab_size: 151_936,
    context_window_size: metadata.context_window_size,
    sliding_window_size: metadata.sliding_window_size,
    prefill_chunk_size: metadata.prefill_chunk_size,
    attention_sink_size: metadata.attention_sink_size,
    tensor_parallel_shards: 1,
    temperature: 0.7,
    presence_penalty: 0,
    frequency_penalty: 0,
    repetition_penalty: 1,
    top_p: 0.8,
    tokenizer_files: ["tokenizer.json"],
    tokenizer_info: {
      token_postproc_method: "byte_level",
      prepend_space_in_encode: false,
      strip_space_in_decode: false,
    },
    conv_template: {
      name: "qwen2",
      system_template: "<|im_start|>system\n{system_message}<|im_end|>\n",
      system_message: "You are a helpful assistant.",
      system_prefix_token_ids: null,
      add_role_after_system_message: true,
      roles: { user: "<|im_start|>user", assistant: "<|im_start|>assistant" },
      role_templates: { user: "{user_message}", assistant: "{assistant_message}", tool: "{tool_message}" },
      messages: [],
      seps: ["<|im_end|>\n"],
      role_content_sep: "\n",
      role_empty_sep: "\n",
      stop_str: ["<|endoftext|>", "<|im_end|>"],
      stop_token_ids: [151_643, 151_645],
      function_string: "",
      use_function_calling: false,
    },
    pad_token_id: 151_643,
    bos_token_id: 151_643,
    eos_token_id: [151_645, 151_643],
  };
}

export async function buildTestModel(outDirectory) {
  const modelDirectory = join(outDirectory, "model");
  const libraryDirectory = join(outDirectory, "lib");
  const stamp = join(outDirectory, "complete.json");
  if (existsSync(stamp)) return JSON.parse(readFileSync(stamp, "utf8"));

  const library = await findLibrary();
  if (sha256(library) !== librarySha256)
    throw new Error(`${libraryName} has sha256 ${sha256(library)}, expected ${librarySha256}`);
  const metadata = embeddedMetadata(library);
  mkdirSync(modelDirectory, { recursive: true });
  mkdirSync(libraryDirectory, { recursive: true });
  writeFileSync(join(libraryDirectory, libraryName), library);

  const next = generator(seed);
  const shards = [];
  let current = null;
  let byteOffset = 0;
  let descriptor = -1;
  const startShard = () => {
    if (descriptor >= 0) closeSync(descriptor);
    const dataPath = `params_shard_${shards.length}.bin`;
    current = { dataPath, format: "raw-shard", nbytes: 0, records: [], md5sum: "" };
    shards.push(current);
    descriptor = openSync(join(modelDirectory, dataPath), "w");
    byteOffset = 0;
  };
  startShard();
  for (const parameter of metadata.params) {
    const bytes = fill(parameter, next);
    if (byteOffset > 0 && byteOffset + bytes.length > shardBytes) startShard();
    writeSync(descriptor, bytes);
    current.records.push({
      name: parameter.name,
      shape: parameter.shape,
      dtype: parameter.dtype,
      format: "raw",
      nbytes: bytes.length,
      byteOffset,
    });
    byteOffset += bytes.length;
    current.nbytes = byteOffset;
  }
  closeSync(descriptor);
  const cache = {
    metadata: {
      ParamSize: metadata.params.length,
      ParamBytes: shards.reduce((sum, shard) => sum + shard.nbytes, 0),
      BitsPerParam: 4.5,
    },
    records: shards,
  };
  writeFileSync(join(modelDirectory, "ndarray-cache.json"), JSON.stringify(cache));
  writeFileSync(join(modelDirectory, "tensor-cache.json"), JSON.stringify(cache));
  writeFileSync(join(modelDirectory, "mlc-chat-config.json"), JSON.stringify(chatConfig(metadata), null, 2));
  const tokenizerDirectory = writeTokenizer("qwen2", join(outDirectory, "tokenizers"));
  writeFileSync(join(modelDirectory, "tokenizer.json"), readFileSync(join(tokenizerDirectory, "tokenizer.json")));
  writeFileSync(
    join(modelDirectory, "tokenizer_config.json"),
    readFileSync(join(tokenizerDirectory, "tokenizer_config.json")),
  );

  const summary = {
    library: libraryName,
    modelType: metadata.model_type,
    quantization: metadata.quantization,
    parameters: metadata.params.length,
    bytes: cache.metadata.ParamBytes,
    shards: shards.length,
    contextWindow: metadata.context_window_size,
    seed,
  };
  writeFileSync(stamp, JSON.stringify(summary, null, 2));
  return summary;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const outDirectory = process.argv[2];
  if (!outDirectory) {
    console.error("usage: node scripts/test-model.mjs <out-dir>");
    process.exit(2);
  }
  const started = Date.now();
  buildTestModel(resolve(outDirectory)).then(
    (summary) => console.log(`test model ready in ${Date.now() - started} ms:`, summary),
    (error) => {
      console.error(error.message);
      process.exit(1);
    },
  );
}
