/**
 * JSON Schema's `pattern` (ECMA 262 syntax): parsed once into a small tree, whose automaton
 * matches values in linear time and samples matching strings (and, determinised, becomes a
 * grammar: pattern-grammar.ts).
 *
 * Supported: literals and escapes, `.`, classes (ranges, negation, `\d \w \s` and their
 * negations), groups (plain, non-capturing, named), alternation, the quantifiers `* + ? {n}
 * {n,} {n,m}` (lazy ones too: the same strings match), and `^`/`$` at the ends of the top-level
 * branches. A pattern is unanchored unless it says otherwise, so an open end allows any text.
 * Lookaround, backreferences, word boundaries and Unicode property escapes are refused by name:
 * a grammar cannot express them.
 */

/** Inclusive code-point ranges, sorted and disjoint. */
export type CharRanges = readonly (readonly [number, number])[];

type RegexNode =
  | { kind: "set"; ranges: CharRanges }
  | { kind: "sequence"; items: RegexNode[] }
  | { kind: "choice"; options: RegexNode[] }
  | { kind: "repeat"; item: RegexNode; min: number; max: number | null };

export interface RegexBranch {
  node: RegexNode;
  anchoredStart: boolean;
  anchoredEnd: boolean;
}

export class PatternError extends Error {}

/**
 * A pattern past our size limits: refused whatever stands beside it, since matching it (in a
 * reply's check) and sampling it cost time and memory in proportion to its spelled-out size.
 */
export class PatternLimitError extends PatternError {}

export const maxCodePoint = 0x10ffff;
/** The largest bound a quantifier may have: each repetition is spelled out in the grammar. */
const maxRepetition = 1000;
/**
 * The most characters a pattern may spell out once its repetitions are expanded: `(a{100}){100}`
 * spells out 10,000. Nested quantifiers multiply, so a short pattern could otherwise ask for
 * billions of automaton states; checking a reply's value costs up to this many steps per character.
 */
const maxPatternSize = 2_000;
/** Groups nest no deeper than this; the parser recurses once per level. */
const maxGroupDepth = 32;

export function normalizeRanges(ranges: Iterable<readonly [number, number]>): CharRanges {
  const sorted = [...ranges].sort((a, b) => a[0] - b[0]);
  const merged: [number, number][] = [];
  for (const [low, high] of sorted) {
    const last = merged.at(-1);
    if (last && low <= last[1] + 1) last[1] = Math.max(last[1], high);
    else merged.push([low, high]);
  }
  return merged;
}

export function complement(ranges: CharRanges): CharRanges {
  const result: [number, number][] = [];
  let next = 0;
  for (const [low, high] of ranges) {
    if (low > next) result.push([next, low - 1]);
    next = high + 1;
  }
  if (next <= maxCodePoint) result.push([next, maxCodePoint]);
  return result;
}

const single = (code: number): CharRanges => [[code, code]];
const digits: CharRanges = [[0x30, 0x39]];
const word: CharRanges = normalizeRanges([
  [0x30, 0x39],
  [0x41, 0x5a],
  [0x5f, 0x5f],
  [0x61, 0x7a],
]);
const space: CharRanges = normalizeRanges([
  [0x09, 0x0d],
  [0x20, 0x20],
  [0xa0, 0xa0],
  [0x1680, 0x1680],
  [0x2000, 0x200a],
  [0x2028, 0x2029],
  [0x202f, 0x202f],
  [0x205f, 0x205f],
  [0x3000, 0x3000],
  [0xfeff, 0xfeff],
]);
const lineTerminators: CharRanges = normalizeRanges([
  [0x0a, 0x0a],
  [0x0d, 0x0d],
  [0x2028, 0x2029],
]);
const classEscapes: Record<string, CharRanges> = {
  d: digits,
  D: complement(digits),
  w: word,
  W: complement(word),
  s: space,
  S: complement(space),
};
const controlEscapes: Record<string, number> = { t: 9, n: 10, v: 11, f: 12, r: 13 };

/** Reads a pattern, one code point at a time. */
class PatternParser {
  readonly #characters: string[];
  #position = 0;
  #depth = 0;

  constructor(source: string) {
    this.#characters = [...source];
  }

  branches(): RegexBranch[] {
    const branches: RegexBranch[] = [];
    do {
      const anchoredStart = this.#eat("^");
      const node = this.#sequence(true);
      const anchoredEnd = this.#eat("$");
      branches.push({ node, anchoredStart, anchoredEnd });
    } while (this.#eat("|"));
    if (this.#position < this.#characters.length) throw new PatternError("an unmatched ')'");
    const size = branches.reduce((sum, branch) => sum + expandedSize(branch.node), 0);
    if (size > maxPatternSize)
      throw new PatternLimitError(
        `repetitions that spell out ${size > 1e15 ? "more than 10^15" : size} characters (at most ${maxPatternSize} in all); lower its quantifiers' bounds`,
      );
    return branches;
  }

  #peek(offset = 0): string | undefined {
    return this.#characters[this.#position + offset];
  }

  #eat(character: string): boolean {
    if (this.#peek() !== character) return false;
    this.#position++;
    return true;
  }

  #choice(): RegexNode {
    const options = [this.#sequence(false)];
    while (this.#eat("|")) options.push(this.#sequence(false));
    return options.length === 1 ? options[0]! : { kind: "choice", options };
  }

  #sequence(topLevel: boolean): RegexNode {
    const items: RegexNode[] = [];
    for (let character = this.#peek(); character !== undefined && character !== "|" && character !== ")";) {
      if (character === "$" && topLevel && (this.#peek(1) === undefined || this.#peek(1) === "|")) break;
      if (character === "^" || character === "$")
        throw new PatternError(
          `the anchor '${character}' inside the pattern (only at the start or end of a top-level branch)`,
        );
      items.push(this.#quantified(this.#atom()));
      character = this.#peek();
    }
    return items.length === 1 ? items[0]! : { kind: "sequence", items };
  }

  #atom(): RegexNode {
    const character = this.#characters[this.#position++]!;
    switch (character) {
      case "(":
        return this.#group();
      case "[":
        return { kind: "set", ranges: this.#class() };
      case ".":
        return { kind: "set", ranges: complement(lineTerminators) };
      case "\\":
        return { kind: "set", ranges: this.#escape(false) };
      case "*":
      case "+":
      case "?":
        throw new PatternError(`a quantifier '${character}' with nothing to repeat`);
      default:
        return { kind: "set", ranges: single(character.codePointAt(0)!) };
    }
  }

  #group(): RegexNode {
    if (this.#eat("?")) {
      const kind = this.#characters[this.#position++];
      if (kind === "=" || kind === "!") throw new PatternError(`lookahead '(?${kind}'`);
      if (kind === "<" && (this.#peek() === "=" || this.#peek() === "!"))
        throw new PatternError(`lookbehind '(?<${this.#peek()}'`);
      if (kind === "<") {
        while (this.#peek() !== undefined && this.#peek() !== ">") this.#position++;
        this.#position++;
      } else if (kind !== ":") throw new PatternError(`the group '(?${kind ?? ""}'`);
    }
    if (++this.#depth > maxGroupDepth)
      throw new PatternLimitError(`groups nested deeper than ${maxGroupDepth} levels; flatten them`);
    const inner = this.#choice();
    this.#depth--;
    if (!this.#eat(")")) throw new PatternError("an unclosed group '('");
    return inner;
  }

  #quantified(item: RegexNode): RegexNode {
    let bounds: [number, number | null] | undefined;
    const character = this.#peek();
    if (character === "*") bounds = [0, null];
    else if (character === "+") bounds = [1, null];
    else if (character === "?") bounds = [0, 1];
    if (bounds) this.#position++;
    else if (character === "{") bounds = this.#braces();
    if (!bounds) return item;
    this.#eat("?"); // lazy: the same strings match
    const [min, max] = bounds;
    if (min > maxRepetition || (max ?? 0) > maxRepetition)
      throw new PatternError(`a repetition bound over ${maxRepetition}`);
    if (max !== null && max < min) throw new PatternError(`the quantifier {${min},${max}} out of order`);
    const next = this.#peek();
    if (next === "*" || next === "+" || next === "?" || (next === "{" && /^\{\d+(,\d*)?\}/.test(this.#rest())))
      throw new PatternError(`a quantifier '${next}' with nothing to repeat`);
    return { kind: "repeat", item, min, max };
  }

  #rest(): string {
    return this.#characters.slice(this.#position, this.#position + 24).join("");
  }

  /** `{n}`, `{n,}` or `{n,m}`; a brace that starts none of them is a literal `{`. */
  #braces(): [number, number | null] | undefined {
    const match = /^\{(\d+)(,(\d*))?\}/.exec(this.#rest());
    if (!match) return undefined;
    this.#position += match[0].length;
    const min = Number(match[1]);
    return [min, match[2] === undefined ? min : match[3] ? Number(match[3]) : null];
  }

  #class(): CharRanges {
    const negated = this.#eat("^");
    const ranges: (readonly [number, number])[] = [];
    while (this.#peek() !== "]") {
      if (this.#peek() === undefined) throw new PatternError("an unclosed class '['");
      const low = this.#classAtom();
      if (this.#peek() === "-" && this.#peek(1) !== "]" && this.#peek(1) !== undefined && low.length === 1) {
        this.#position++;
        const high = this.#classAtom();
        if (high.length !== 1 || low[0]![0] !== low[0]![1] || high[0]![0] !== high[0]![1])
          throw new PatternError("a class range with a class escape at one end");
        if (high[0]![0] < low[0]![0]) throw new PatternError("a class range out of order");
        ranges.push([low[0]![0], high[0]![0]]);
      } else ranges.push(...low);
    }
    this.#position++;
    const set = normalizeRanges(ranges);
    return negated ? complement(set) : set;
  }

  #classAtom(): CharRanges {
    const character = this.#characters[this.#position++]!;
    return character === "\\" ? this.#escape(true) : single(character.codePointAt(0)!);
  }

  #escape(inClass: boolean): CharRanges {
    const character = this.#characters[this.#position++];
    if (character === undefined) throw new PatternError("a trailing backslash");
    if (classEscapes[character]) return classEscapes[character];
    if (controlEscapes[character] !== undefined) return single(controlEscapes[character]);
    if (character === "b" && inClass) return single(8);
    if (character === "b" || character === "B") throw new PatternError(`the word boundary '\\${character}'`);
    if (/[1-9]/.test(character) || (character === "k" && this.#peek() === "<"))
      throw new PatternError(`the backreference '\\${character}'`);
    if (character === "p" || character === "P") throw new PatternError(`the Unicode property escape '\\${character}'`);
    if (character === "0" && !/\d/.test(this.#peek() ?? "")) return single(0);
    if (character === "c" && /[A-Za-z]/.test(this.#peek() ?? ""))
      return single(this.#characters[this.#position++]!.codePointAt(0)! % 32);
    if (character === "x" && /^[0-9a-fA-F]{2}/.test(this.#rest())) return single(this.#hex(2));
    if (character === "u") return single(this.#unicodeEscape());
    return single(character.codePointAt(0)!);
  }

  #hex(length: number): number {
    const text = this.#characters.slice(this.#position, this.#position + length).join("");
    this.#position += length;
    return parseInt(text, 16);
  }

  /** `\uHHHH` (a surrogate pair written as two is one code point) or `\u{H…}`. */
  #unicodeEscape(): number {
    const braced = /^\{([0-9a-fA-F]{1,6})\}/.exec(this.#rest());
    if (braced) {
      this.#position += braced[0].length;
      return Math.min(parseInt(braced[1]!, 16), maxCodePoint);
    }
    if (!/^[0-9a-fA-F]{4}/.test(this.#rest())) return "u".codePointAt(0)!;
    const high = this.#hex(4);
    if (high >= 0xd800 && high <= 0xdbff && /^\\u[dD][c-fC-F][0-9a-fA-F]{2}/.test(this.#rest())) {
      this.#position += 2;
      const low = this.#hex(4);
      return 0x10000 + ((high - 0xd800) << 10) + (low - 0xdc00);
    }
    return high;
  }
}

/** How many repetitions past its minimum a sample of an open-ended quantifier (`*`, `+`, `{n,}`) may have. */
const openEndedExtra = 3;

/**
 * How many characters `node` spells out with every repetition expanded (an open-ended one as a
 * sample may have it): a bound on both the size of its automaton and a sample's length.
 */
function expandedSize(node: RegexNode): number {
  switch (node.kind) {
    case "set":
      return 1;
    case "sequence":
    case "choice": {
      const children = node.kind === "sequence" ? node.items : node.options;
      return children.reduce((sum, child) => sum + expandedSize(child), 0);
    }
    case "repeat":
      return expandedSize(node.item) * Math.max(node.max ?? node.min + openEndedExtra, 1);
  }
}

export function parsePattern(source: string): RegexBranch[] {
  return new PatternParser(source).branches();
}

// ------------------------------------------------------------------ character sets

export const surrogates: CharRanges = [[0xd800, 0xdfff]];

export function intersect(a: CharRanges, b: CharRanges): CharRanges {
  const result: [number, number][] = [];
  for (const [lowA, highA] of a)
    for (const [lowB, highB] of b) {
      const low = Math.max(lowA, lowB);
      const high = Math.min(highA, highB);
      if (low <= high) result.push([low, high]);
    }
  return normalizeRanges(result);
}

// ------------------------------------------------------------------ sampling

/** A character of `ranges`, printable ASCII when it has any, never a lone surrogate. */
function sampleCharacter(ranges: CharRanges, random: () => number): string {
  const printable = intersect(ranges, [[0x20, 0x7e]]);
  const pool = printable.length > 0 ? printable : intersect(ranges, complement(surrogates));
  const total = pool.reduce((sum, [low, high]) => sum + high - low + 1, 0);
  let index = Math.floor(random() * total);
  for (const [low, high] of pool) {
    if (index <= high - low) return String.fromCodePoint(low + index);
    index -= high - low + 1;
  }
  return String.fromCodePoint(pool[0]![0]);
}

function sampleNode(node: RegexNode, random: () => number): string {
  switch (node.kind) {
    case "set":
      return sampleCharacter(node.ranges, random);
    case "sequence":
      return node.items.map((item) => sampleNode(item, random)).join("");
    case "choice":
      return sampleNode(node.options[Math.floor(random() * node.options.length)]!, random);
    case "repeat": {
      const most = Math.min(node.max ?? node.min + openEndedExtra, node.min + openEndedExtra);
      const count = node.min + Math.floor(random() * (most - node.min + 1));
      return Array.from({ length: count }, () => sampleNode(node.item, random)).join("");
    }
  }
}

/** A string the pattern matches (the match alone: an open end adds nothing). */
export function samplePattern(branches: readonly RegexBranch[], random: () => number): string {
  return sampleNode(branches[Math.floor(random() * branches.length)]!.node, random);
}

// ------------------------------------------------------------------ matching

/**
 * A state of the pattern's automaton: a character of a set, a fork, or the match. Matching runs
 * every live state at once (Thompson's construction), so it takes time linear in the value
 * whatever the pattern: a caller's pattern never runs on a backtracking engine here.
 */
export type State =
  { kind: "set"; ranges: CharRanges; next: number } | { kind: "fork"; next: number[] } | { kind: "match" };

export class Automaton {
  readonly states: State[] = [{ kind: "match" }];

  add(state: State): number {
    this.states.push(state);
    return this.states.length - 1;
  }

  /** The state that starts `node`, continuing to `next` once it has matched. */
  build(node: RegexNode, next: number): number {
    switch (node.kind) {
      case "set":
        return this.add({ kind: "set", ranges: node.ranges, next });
      case "sequence":
        return node.items.reduceRight((continuation, item) => this.build(item, continuation), next);
      case "choice":
        return this.add({ kind: "fork", next: node.options.map((option) => this.build(option, next)) });
      case "repeat":
        return this.#repeat(node, next);
    }
  }

  #repeat(node: Extract<RegexNode, { kind: "repeat" }>, next: number): number {
    let start: number;
    if (node.max === null) {
      const loop = this.add({ kind: "fork", next: [] });
      (this.states[loop] as { next: number[] }).next = [this.build(node.item, loop), next];
      start = loop;
    } else {
      start = next;
      for (let count = node.max - node.min; count > 0; count--)
        start = this.add({ kind: "fork", next: [this.build(node.item, start), next] });
    }
    for (let count = 0; count < node.min; count++) start = this.build(node.item, start);
    return start;
  }

  /**
   * Adds to `into` the states reached from `from` without reading a character. A state is in a
   * step's list at most once (`seen` holds the step that last added it), so a step costs at most
   * the automaton's size.
   */
  close(from: number, into: number[], seen: Int32Array, step: number): void {
    const pending = [from];
    while (pending.length > 0) {
      const index = pending.pop()!;
      if (seen[index] === step) continue;
      seen[index] = step;
      into.push(index);
      const state = this.states[index]!;
      if (state.kind === "fork") for (const next of state.next) pending.push(next);
    }
  }
}

function inRanges(ranges: CharRanges, code: number): boolean {
  let low = 0;
  let high = ranges.length - 1;
  while (low <= high) {
    const middle = (low + high) >> 1;
    const [from, to] = ranges[middle]!;
    if (code < from) high = middle - 1;
    else if (code > to) low = middle + 1;
    else return true;
  }
  return false;
}

function branchMatches(branch: RegexBranch, value: string): boolean {
  const automaton = new Automaton();
  const start = automaton.build(branch.node, 0);
  const seen = new Int32Array(automaton.states.length).fill(-1);
  let step = 0;
  let live: number[] = [];
  automaton.close(start, live, seen, step);
  for (const character of value) {
    if (!branch.anchoredEnd && seen[0] === step) return true;
    const code = character.codePointAt(0)!;
    const next: number[] = [];
    step++;
    for (const index of live) {
      const state = automaton.states[index]!;
      if (state.kind === "set" && inRanges(state.ranges, code)) automaton.close(state.next, next, seen, step);
    }
    if (!branch.anchoredStart) automaton.close(start, next, seen, step);
    else if (next.length === 0) return false; // nothing left alive, and nothing starts again
    live = next;
  }
  return seen[0] === step;
}

// ------------------------------------------------------------------ sampling within lengths

/** The most states × lengths one length-bound sampler may tabulate: past it, none is made. */
const lengthTableLimit = 4_000_000;

/** Strings of a pattern within length bounds, drawn by `random`. */
export type LengthSampler = (random: () => number) => string;

/** The cells (states × lengths) that samplers may still tabulate, shared by those of one sample. */
export interface TableBudget {
  cells: number;
}

/** The cells one schema's length tables may take in all (its grammar's check, or one sample): a few tables' worth. */
export const tableCellsPerSchema = 20_000_000;

/**
 * For each count of characters left (0 to `longest`), the states that can still end in a match
 * reading exactly that many: those that reach the match without reading, then those that read a
 * character into the previous count's, each closed back over forks. A row costs the automaton's size.
 */
function finishingRows(automaton: Automaton, longest: number): Uint8Array[] {
  const { states } = automaton;
  const forksInto: number[][] = states.map(() => []);
  states.forEach((state, index) => {
    if (state.kind === "fork") for (const next of state.next) forksInto[next]!.push(index);
  });
  const rows: Uint8Array[] = [];
  for (let left = 0; left <= longest; left++) {
    const row = new Uint8Array(states.length);
    const previous = rows[left - 1];
    const pending: number[] = [];
    if (previous === undefined) pending.push(0);
    else
      states.forEach((state, index) => {
        if (state.kind === "set" && previous[state.next] === 1) pending.push(index);
      });
    while (pending.length > 0) {
      const index = pending.pop()!;
      if (row[index] === 1) continue;
      row[index] = 1;
      pending.push(...forksInto[index]!);
    }
    rows.push(row);
  }
  return rows;
}

/** The character-reading states reached from `from` without reading, whose next state is in `row`. */
function readersInto(automaton: Automaton, from: number, row: Uint8Array): Extract<State, { kind: "set" }>[] {
  const seen = new Uint8Array(automaton.states.length);
  const found: Extract<State, { kind: "set" }>[] = [];
  const pending = [from];
  while (pending.length > 0) {
    const index = pending.pop()!;
    if (seen[index] === 1) continue;
    seen[index] = 1;
    const state = automaton.states[index]!;
    if (state.kind === "fork") pending.push(...state.next);
    else if (state.kind === "set" && row[state.next] === 1) found.push(state);
  }
  return found;
}

/**
 * A sampler of strings one branch matches whose length (in code points) is from `min` to `max`:
 * null when there is none, undefined when the table would pass its limit or the budget. An open
 * end takes any text, so there a shorter match is padded. Tabulated once, then each sample walks
 * the automaton through states that can still finish, in time linear in its length times the
 * automaton's size.
 */
function branchSamplerWithin(
  branch: RegexBranch,
  min: number,
  max: number,
  budget: TableBudget,
): LengthSampler | null | undefined {
  const automaton = new Automaton();
  const start = automaton.build(branch.node, 0);
  const open = !branch.anchoredStart || !branch.anchoredEnd;
  // Past `min` by the automaton's size, a length that matches has a shorter one that does too.
  const longest = Math.min(max, min + automaton.states.length + 1);
  const cells = automaton.states.length * (longest + 1);
  if (cells > Math.min(lengthTableLimit, budget.cells)) return undefined;
  budget.cells -= cells;
  const rows = finishingRows(automaton, longest);
  const lengths: number[] = [];
  for (let length = open ? 0 : min; length <= longest && lengths.length < 13; length++)
    if (rows[length]![start] === 1) lengths.push(length);
  if (lengths.length === 0) return null;
  return (random) => {
    const length = lengths[Math.floor(random() * lengths.length)]!;
    let text = "";
    let current = start;
    for (let left = length; left > 0; left--) {
      const readers = readersInto(automaton, current, rows[left - 1]!);
      const reader = readers[Math.floor(random() * readers.length)]!;
      text += sampleCharacter(reader.ranges, random);
      current = reader.next;
    }
    const padding = "x".repeat(Math.max(0, min - length));
    return branch.anchoredEnd ? padding + text : text + padding;
  };
}

/**
 * A sampler of strings the pattern matches with a length from `min` to `max`; null when the
 * pattern has no such string, undefined when it was not tabulated (past the budget).
 */
export function patternSamplerWithin(
  branches: readonly RegexBranch[],
  min: number,
  max: number,
  budget: TableBudget,
): LengthSampler | null | undefined {
  const found = branches.map((branch) => branchSamplerWithin(branch, min, max, budget));
  const samplers = found.flatMap((sampler) => sampler ?? []);
  if (samplers.length === 0) return found.includes(undefined) ? undefined : null;
  return (random) => samplers[Math.floor(random() * samplers.length)]!(random);
}

/** Whether the pattern matches somewhere in `value` (or all of it, as its anchors say), in linear time. */
export function patternMatchesValue(branches: readonly RegexBranch[], value: string): boolean {
  return branches.some((branch) => branchMatches(branch, value));
}
