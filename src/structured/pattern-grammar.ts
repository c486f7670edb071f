/**
 * A `pattern` as a grammar for the JSON text of the strings it matches, built from the pattern's
 * automaton made deterministic (subset construction): one rule per state, whose alternatives
 * each begin with a character no other alternative of the rule begins with. The grammar is
 * unambiguous, so a matcher that follows it (llama.cpp's, which keeps every parse open at once)
 * holds a handful of parses whatever the pattern: nested optional groups such as
 * `((a?){2}){2}…` once kept a number of parses that grew with every level, and froze llama.cpp.
 *
 * Making an automaton deterministic can take exponentially many states (`(a|b)*a(a|b){20}`);
 * such a pattern is refused by name, with the bound it passed, before any grammar is used.
 */
import { literal, type RuleSink } from "./ebnf.js";
import {
  Automaton,
  complement,
  intersect,
  maxCodePoint,
  normalizeRanges,
  PatternError,
  PatternLimitError,
  surrogates,
  type CharRanges,
  type RegexBranch,
  type State,
} from "./regex.js";

/** The most states a pattern's deterministic automaton may have; each is a rule of the grammar. */
const maxPatternStates = 4_000;
/** The most steps (an automaton state's characters, visited per deterministic state) building it may take. */
const maxDeterminisingWork = 2_000_000;

/** Characters a JSON string holds raw: not `"`, `\`, a control character, nor a lone surrogate. */
const unsafe = normalizeRanges([
  [0x00, 0x1f],
  [0x22, 0x22],
  [0x5c, 0x5c],
  [0xd800, 0xdfff],
]);
/** Every character a JSON string can hold: lone surrogates cannot be written. */
const writable = complement(surrogates);

function classCharacter(code: number): string {
  if (code < 0x20 || code === 0x7f) return `\\x${code.toString(16).padStart(2, "0")}`;
  const character = String.fromCodePoint(code);
  return "\\]-^[".includes(character) ? `\\${character}` : character;
}

function classBody(ranges: CharRanges): string {
  return ranges
    .map(([low, high]) => (low === high ? classCharacter(low) : `${classCharacter(low)}-${classCharacter(high)}`))
    .join("");
}

/**
 * The grammar of one character of `ranges` as it appears in JSON text: raw where JSON allows,
 * escaped (`\"`, `\\`, `\n`, `\u000b`…) where it must be. Lone surrogates are left out.
 */
function charactersGrammar(ranges: CharRanges): string {
  const raw = intersect(ranges, complement(unsafe));
  const alternatives: string[] = [];
  if (raw.length > 0) {
    // A set reaching the last code point is written as what it leaves out, which is shorter.
    const reachesEnd = raw.at(-1)![1] === maxCodePoint;
    const left = intersect(complement(raw), writable);
    alternatives.push(reachesEnd ? `[^${classBody(left)}]` : `[${classBody(raw)}]`);
  }
  for (const [low, high] of intersect(ranges, unsafe)) {
    for (let code = low; code <= high && code < 0xd800; code++)
      alternatives.push(literal(JSON.stringify(String.fromCodePoint(code)).slice(1, -1)));
  }
  if (alternatives.length === 0) throw new PatternError("a class that matches no character a JSON string can hold");
  return alternatives.length === 1 ? alternatives[0]! : `(${alternatives.join(" | ")})`;
}

/** The pattern's automaton: every branch from one start, an unanchored start looping on any character. */
interface Nondeterministic {
  automaton: Automaton;
  start: number;
  /** The state an unanchored end reaches: from it, any text is a match. */
  open: number;
}

function nondeterministic(branches: readonly RegexBranch[]): Nondeterministic {
  const automaton = new Automaton();
  // A marker with nowhere to go: the deterministic construction reads it as "any text from here".
  const open = automaton.add({ kind: "fork", next: [] });
  const starts = branches.map((branch) => {
    const start = automaton.build(branch.node, branch.anchoredEnd ? 0 : open);
    if (branch.anchoredStart) return start;
    const loop = automaton.add({ kind: "fork", next: [] });
    const any = automaton.add({ kind: "set", ranges: writable, next: loop });
    (automaton.states[loop] as { next: number[] }).next = [any, start];
    return loop;
  });
  return { automaton, start: automaton.add({ kind: "fork", next: starts }), open };
}

/**
 * The code points cut into atoms, the coarsest pieces no character set of the automaton splits,
 * and each set's atoms: a deterministic state's moves are then found atom by atom.
 */
function atomsOf(states: readonly State[]): { atoms: CharRanges; of: Map<number, number[]> } {
  const cuts = new Set<number>([0, maxCodePoint + 1]);
  const sets = states.flatMap((state, index) =>
    state.kind === "set" ? [{ index, ranges: intersect(state.ranges, writable) }] : [],
  );
  for (const { ranges } of sets) for (const [low, high] of ranges) cuts.add(low).add(high + 1);
  const sorted = [...cuts].sort((a, b) => a - b);
  const atoms = sorted.slice(0, -1).map((low, index) => [low, sorted[index + 1]! - 1] as const);
  const firstAtom = (code: number) => {
    let low = 0;
    let high = atoms.length - 1;
    while (low < high) {
      const middle = (low + high + 1) >> 1;
      if (atoms[middle]![0] <= code) low = middle;
      else high = middle - 1;
    }
    return low;
  };
  const of = new Map<number, number[]>();
  for (const { index, ranges } of sets) {
    const list: number[] = [];
    for (const [low, high] of ranges)
      for (let atom = firstAtom(low); atom < atoms.length && atoms[atom]![1] <= high; atom++) list.push(atom);
    of.set(index, list);
  }
  return { atoms, of };
}

/** A deterministic state: the automaton's character-reading states it stands for, and whether it matches. */
interface DeterministicState {
  readers: number[];
  accepting: boolean;
  /** Any text from here matches (an unanchored end was reached). */
  open: boolean;
  /** Its moves: the characters of each, and the state it goes to. */
  moves: { ranges: CharRanges; to: number }[];
}

function limitError(what: string): PatternLimitError {
  return new PatternLimitError(
    `${what}; a grammar that followed it as written would be ambiguous and slow to follow, so it is refused: simplify its nested or repeated optional parts, or anchor it (^…$)`,
  );
}

/** The states reached from `from` without reading, as a deterministic state's key and contents. */
function closure(automaton: Automaton, from: readonly number[], open: number) {
  const seen = new Set<number>();
  const pending = [...from];
  const readers: number[] = [];
  let accepting = false;
  let reachesOpen = false;
  while (pending.length > 0) {
    const index = pending.pop()!;
    if (seen.has(index)) continue;
    seen.add(index);
    const state = automaton.states[index]!;
    if (index === open) reachesOpen = true;
    if (state.kind === "match") accepting = true;
    else if (state.kind === "fork") pending.push(...state.next);
    else readers.push(index);
  }
  readers.sort((a, b) => a - b);
  // From an open end any text matches, whatever else is still possible: one state stands for all of them.
  if (reachesOpen) return { key: "open", readers: [], accepting: true, open: true };
  return { key: `${accepting ? "+" : ""}${readers.join(",")}`, readers, accepting, open: false };
}

/** The pattern's deterministic automaton; `PatternLimitError` past its bounds. */
function determinised(branches: readonly RegexBranch[]): DeterministicState[] {
  const { automaton, start, open } = nondeterministic(branches);
  const { atoms, of } = atomsOf(automaton.states);
  const states: DeterministicState[] = [];
  const known = new Map<string, number>();
  let work = 0;
  const stateOf = (from: readonly number[]) => {
    const found = closure(automaton, from, open);
    work += found.readers.length;
    let index = known.get(found.key);
    if (index === undefined) {
      if (states.length >= maxPatternStates)
        throw limitError(`more than ${maxPatternStates} states once made deterministic`);
      index = states.push({ readers: found.readers, accepting: found.accepting, open: found.open, moves: [] }) - 1;
      known.set(found.key, index);
    }
    return index;
  };
  stateOf([start]);
  for (let current = 0; current < states.length; current++) {
    const state = states[current]!;
    const targets = new Map<number, number[]>();
    for (const reader of state.readers) {
      const next = (automaton.states[reader] as { next: number }).next;
      for (const atom of of.get(reader)!) (targets.get(atom) ?? targets.set(atom, []).get(atom)!).push(next);
      work += of.get(reader)!.length;
    }
    if (work > maxDeterminisingWork) throw limitError(`more than ${maxDeterminisingWork} steps to make deterministic`);
    const byTarget = new Map<number, [number, number][]>();
    for (const [atom, next] of [...targets].sort((a, b) => a[0] - b[0])) {
      const to = stateOf(next);
      (byTarget.get(to) ?? byTarget.set(to, []).get(to)!).push([atoms[atom]![0], atoms[atom]![1]]);
    }
    state.moves = [...byTarget].map(([to, ranges]) => ({ ranges: normalizeRanges(ranges), to }));
  }
  return states;
}

/** The states from which a match can still be reached; the others are left out of the grammar (a dead end would stall a model). */
function liveStates(states: readonly DeterministicState[]): Set<number> {
  const into = states.map((): number[] => []);
  states.forEach((state, index) => state.moves.forEach((move) => into[move.to]!.push(index)));
  const live = new Set<number>();
  const pending = states.flatMap((state, index) => (state.accepting ? [index] : []));
  while (pending.length > 0) {
    const index = pending.pop()!;
    if (live.has(index)) continue;
    live.add(index);
    pending.push(...into[index]!);
  }
  return live;
}

/** The grammar of the JSON text (without quotes) of strings `pattern` matches (anywhere, unless anchored). */
export function patternGrammar(branches: readonly RegexBranch[], rules: RuleSink, anyCharacter: string): string {
  const states = determinised(branches);
  const live = liveStates(states);
  if (!live.has(0)) throw new PatternError("no match that a JSON string can hold");
  rules.spend(states.reduce((sum, state) => sum + state.moves.length, 0));
  const names = states.map((_, index) => (live.has(index) ? rules.rule("pattern_state", '""') : ""));
  states.forEach((state, index) => {
    if (!live.has(index)) return;
    if (state.open) return rules.define(names[index]!, `${anyCharacter}*`);
    const moves = state.moves
      .filter((move) => live.has(move.to))
      .map((move) => `${rules.shared("pattern_character", charactersGrammar(move.ranges))} ${names[move.to]}`);
    const body = moves.length === 0 ? '""' : `(${moves.join(" | ")})${state.accepting ? "?" : ""}`;
    rules.define(names[index]!, body);
  });
  return names[0]!;
}
