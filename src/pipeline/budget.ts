/**
 * The context window, enforced before anything is admitted: a prompt's exact token count (a
 * prompt certainly too long is refused without being tokenized whole), and the completion budget
 * that prompt leaves.
 */
import { BadRequestError } from "../core/errors/api.js";
import type { ModelEntry } from "../catalogue/entry.js";
import { encodePrompt, type PromptPiece, type Tokenizer } from "../prompt/tokenizer.js";
import { piecesText } from "../prompt/templates.js";

export function contextExceeded(window: number, param: string, tokens: string): BadRequestError {
  return new BadRequestError(
    `This model's maximum context length is ${window} tokens. However, your ${param} resulted in ${tokens} tokens. Please reduce the length of the ${param}.`,
    {
      code: "context_length_exceeded",
      param,
    },
  );
}

/**
 * `max_tokens` as the engine must see it. Prompt plus completion must fit the window; when the
 * client gives no `max_tokens`, the completion may use what the prompt leaves.
 */
export function completionBudget(
  model: ModelEntry,
  promptTokens: number,
  requested: number | null | undefined,
  param: string,
): number {
  const window = model.contextWindow;
  if (requested != null && promptTokens + requested > window) {
    throw new BadRequestError(
      `This model's maximum context length is ${window} tokens. However, you requested ${promptTokens + requested} tokens ` +
        `(${promptTokens} in the ${param}, ${requested} in the completion). Please reduce the length of the ${param} or completion.`,
      { code: "context_length_exceeded", param },
    );
  }
  if (requested == null && promptTokens >= window) throw contextExceeded(window, param, String(promptTokens));
  return requested ?? window - promptTokens;
}

/** Pieces of a long prompt are this many characters at most. */
const pieceCharacters = 2_048;
/**
 * How many tokens a cut between two pieces can save the whole text over the pieces counted apart,
 * at most: only tokens that would span the cut can merge, and cuts fall before a space where one
 * is near, which no token of these tokenizers spans.
 */
const tokensPerCut = 64;

/**
 * Refuses a prompt too long for the window as soon as that is certain, without tokenizing the
 * rest, so a giant prompt costs milliseconds and blocks no other request: a long prompt is first
 * counted in pieces, and the pieces' counts less `tokensPerCut` per cut are a lower bound of the
 * whole's.
 */
function refuseCertainlyTooLong(
  text: string,
  encode: (text: string) => number[],
  tokenizer: Tokenizer,
  model: ModelEntry,
  param: string,
): void {
  // A sound bound, known at once: no prompt of more characters than the window times the
  // longest token is tokenized before it is refused.
  const fewest = tokenizer.fewestTokens(text);
  if (fewest > model.contextWindow) throw contextExceeded(model.contextWindow, param, `at least ${fewest}`);
  // A prompt of up to 4 characters per token of window is cheap to count whole, and most fit:
  // only longer ones are counted in pieces first, so a prompt is not tokenized twice on the way.
  if (text.length <= Math.max(pieceCharacters, model.contextWindow * 4)) return;
  let lowerBound = 0;
  // Repeated text gives repeated pieces, and a run without spaces is the slowest to encode:
  // a piece seen before is counted once.
  const counted = new Map<string, number>();
  for (let start = 0, cuts = 0; start < text.length; cuts++) {
    let end = Math.min(text.length, start + pieceCharacters);
    // A cut before a space in the piece's second half, looked for there only (lastIndexOf would
    // scan back to the start of a text without spaces, each piece: quadratic).
    if (end < text.length) {
      for (let index = end; index > start + pieceCharacters / 2; index--) {
        if (text.charCodeAt(index) === 32) {
          end = index;
          break;
        }
      }
    }
    const piece = text.slice(start, end);
    let tokens = counted.get(piece);
    if (tokens === undefined) counted.set(piece, (tokens = encode(piece).length));
    lowerBound += tokens;
    if (lowerBound - cuts * tokensPerCut > model.contextWindow)
      throw contextExceeded(model.contextWindow, param, `at least ${lowerBound - cuts * tokensPerCut}`);
    start = end;
  }
}

/** A client's raw prompt's exact token count (legacy completions: special-token strings in it are its own to write). */
export function countPromptTokens(tokenizer: Tokenizer, text: string, model: ModelEntry, param: string): number {
  refuseCertainlyTooLong(text, (piece) => tokenizer.encode(piece), tokenizer, model, param);
  return tokenizer.encode(text).length;
}

/** Text's exact token count as text (an embedding's input: special-token strings in it stay text), refused as soon as it certainly cannot fit. */
export function countTextTokens(tokenizer: Tokenizer, text: string, model: ModelEntry, param: string): number {
  refuseCertainlyTooLong(text, (piece) => tokenizer.encodeText(piece), tokenizer, model, param);
  return tokenizer.encodeText(text).length;
}

/** A client's token-id prompt's count, refused before anything is decoded when the window cannot hold it. */
export function countPromptIds(ids: readonly number[], model: ModelEntry, param: string): number {
  if (ids.length > model.contextWindow) throw contextExceeded(model.contextWindow, param, String(ids.length));
  return ids.length;
}

/** A rendered chat prompt's token ids, its messages' text encoded as text (see `encodePrompt`). */
export function promptTokenIds(
  tokenizer: Tokenizer,
  pieces: readonly PromptPiece[],
  model: ModelEntry,
  param: string,
): number[] {
  refuseCertainlyTooLong(
    piecesText(pieces.filter((piece) => !piece.control)),
    (piece) => tokenizer.encodeText(piece),
    tokenizer,
    model,
    param,
  );
  return encodePrompt(tokenizer, pieces);
}
