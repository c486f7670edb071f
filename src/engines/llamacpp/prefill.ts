/** How a prompt meets llama.cpp's KV cache: the prefix it reuses, and the batches it prefills. */

/** How many leading ids two prompts share. */
export function sharedPrefix(cached: readonly number[], prompt: readonly number[]): number {
  let length = 0;
  while (length < cached.length && length < prompt.length && cached[length] === prompt[length]) length++;
  return length;
}

/**
 * The prompt's batches from `first` to `end`: as few as `size` allows, of lengths that differ by
 * at most one. Why near-equal: a batch of one token runs at the generation rate, while our
 * build's Q4_0, Q5_0 and Q8_0 kernel takes a batch's tokens six at a time, each weight block
 * unpacked once for all six (native/llamacpp/tiles.c); 33 tokens in batches of 32 are 17 and 16,
 * not 32 and 1.
 */
export function prefillBatches(first: number, end: number, size: number): [number, number][] {
  const count = Math.ceil((end - first) / size);
  const batches: [number, number][] = [];
  for (let index = 0; index < count; index++) {
    const next = first + Math.ceil((end - first) / (count - index));
    batches.push([first, next]);
    first = next;
  }
  return batches;
}
