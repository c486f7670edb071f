/**
 * Grammars for numbers within bounds. Integers are exact: canonical decimals (no leading zeros)
 * in [minimum, maximum], by splitting the range by length and digit. Decimals are a subset that
 * is never wrong: an integer part inside the bounds with any fraction, and at a bound that is not
 * a whole number, fractions compared digit by digit. Exponents are left out when a bound is set.
 */

/** Integer bounds past this many digits are clamped (an upper bound) or refused (a lower one). */
const maxDigits = 30;
const limit = 10n ** BigInt(maxDigits) - 1n;

function digitClass(low: number, high: number): string {
  return low === high ? `"${low}"` : `[${low}-${high}]`;
}

function anyDigits(count: number): string[] {
  return Array.from({ length: count }, () => "[0-9]");
}

/** Digit strings of `low`'s length between `low` and `high`, which have the same length. */
function sameLength(low: string, high: string): string {
  if (low === high) return `"${low}"`;
  let common = 0;
  while (low[common] === high[common]) common++;
  const prefix = low.slice(0, common);
  const lowDigit = Number(low[common]);
  const highDigit = Number(high[common]);
  const lowRest = low.slice(common + 1);
  const highRest = high.slice(common + 1);
  const options: string[] = [];
  let middleLow = lowDigit;
  let middleHigh = highDigit;
  if (lowRest.length > 0 && !/^0*$/.test(lowRest)) {
    options.push(`"${lowDigit}" ${sameLength(lowRest, "9".repeat(lowRest.length))}`);
    middleLow++;
  }
  if (highRest.length > 0 && !/^9*$/.test(highRest)) {
    options.push(`"${highDigit}" ${sameLength("0".repeat(highRest.length), highRest)}`);
    middleHigh--;
  }
  if (middleLow <= middleHigh)
    options.push([digitClass(middleLow, middleHigh), ...anyDigits(lowRest.length)].join(" "));
  const body = options.length === 1 ? options[0]! : `(${options.join(" | ")})`;
  return prefix ? `"${prefix}" ${body}` : body;
}

/** Canonical naturals in [low, high] (high null: no upper bound); null when there are none. */
function naturalRange(low: bigint, high: bigint | null): string | null {
  const top = high === null || high > limit ? null : high;
  if (top !== null && low > top) return null;
  if (low > limit) return null;
  const lowText = low.toString();
  const lastLength = top === null ? lowText.length : top.toString().length;
  const options: string[] = [];
  for (let length = lowText.length; length <= lastLength; length++) {
    const from = length === lowText.length ? lowText : `1${"0".repeat(length - 1)}`;
    const to = top !== null && length === lastLength ? top.toString() : "9".repeat(length);
    options.push(sameLength(from, to));
  }
  // An upper bound past the limit is clamped to numbers of at most `maxDigits` digits: still all valid.
  const openLength = top === null ? (high === null ? Infinity : maxDigits) : 0;
  if (openLength === Infinity) options.push(["[1-9]", ...anyDigits(lowText.length), "[0-9]*"].join(" "));
  else if (openLength > lowText.length)
    for (let length = lowText.length + 1; length <= openLength; length++)
      options.push(["[1-9]", ...anyDigits(length - 1)].join(" "));
  return options.length === 1 ? options[0]! : `(${options.join(" | ")})`;
}

/** Integers in [low, high]; null bounds are open. Null when none. */
export function integerRange(low: bigint | null, high: bigint | null): string | null {
  const options: string[] = [];
  if (high === null || high >= 0n) {
    const naturals = naturalRange(low === null || low < 0n ? 0n : low, high);
    if (naturals) options.push(naturals);
  }
  if (low === null || low < 0n) {
    const magnitudes = naturalRange(high === null || high >= 0n ? 1n : -high, low === null ? null : -low);
    if (magnitudes) options.push(`"-" ${magnitudes}`);
  }
  if (options.length === 0) return null;
  return options.length === 1 ? options[0]! : `(${options.join(" | ")})`;
}

export interface NumberBounds {
  minimum?: number;
  minimumExclusive: boolean;
  maximum?: number;
  maximumExclusive: boolean;
  /** At most this many fraction digits (`multipleOf` 10^-k); 0 for whole numbers. */
  fractionDigits?: number;
}

/** The fraction digits of a bound written without an exponent; undefined when it needs one. */
function fractionOf(value: number): string | undefined {
  const text = String(value);
  if (/e/i.test(text)) return undefined;
  return text.split(".")[1] ?? "";
}

const padded = (digits: string, index: number): number => Number(digits[index] ?? "0");

/** Fraction digit strings s with 0.s above 0.f (or equal when inclusive); `index` digits already equal. */
function above(f: string, inclusive: boolean, index = 0): string {
  if (index >= f.length) return inclusive ? (index === 0 ? "[0-9]+" : "[0-9]*") : "[0-9]* [1-9]";
  const digit = padded(f, index);
  const options = [`"${digit}" ${above(f, inclusive, index + 1)}`];
  if (digit < 9) options.unshift(`${digitClass(digit + 1, 9)} [0-9]*`);
  return `(${options.join(" | ")})`;
}

/** Fraction digit strings s with 0.s below 0.g (or equal); null when none. `g` has no trailing zeros. */
function below(g: string, inclusive: boolean, index = 0): string | null {
  if (index >= g.length) return inclusive ? '"0"*' : null;
  const digit = padded(g, index);
  const options: string[] = [];
  if (digit > 0) options.push(`${digitClass(0, digit - 1)} [0-9]*`);
  const rest = below(g, inclusive, index + 1);
  if (rest) options.push(`"${digit}" ${rest}`);
  // Past the first digit, the fraction may also end here: what it has is below g.
  if (index > 0) return options.length ? `(${options.join(" | ")})?` : null;
  return options.length ? `(${options.join(" | ")})` : null;
}

/** Fraction digit strings strictly (or not) between 0.f and 0.g, f < g. */
function between(f: string, fInclusive: boolean, g: string, gInclusive: boolean, index = 0): string | null {
  if (index >= f.length && index >= g.length) return fInclusive && gInclusive ? '"0"*' : null;
  const low = padded(f, index);
  const high = padded(g, index);
  if (low === high) {
    const rest = between(f, fInclusive, g, gInclusive, index + 1);
    return rest ? `"${low}" ${rest}` : null;
  }
  const options: string[] = [];
  options.push(`"${low}" ${above(f, fInclusive, index + 1)}`);
  if (low + 1 <= high - 1) options.push(`${digitClass(low + 1, high - 1)} [0-9]*`);
  const upper = below(g, gInclusive, index + 1);
  if (upper) options.push(`"${high}" ${upper}`);
  // Ending here equals f, when f has no more digits and may be reached.
  const mayEnd = index > 0 && index >= f.length && fInclusive;
  return `(${options.join(" | ")})${mayEnd ? "?" : ""}`;
}

const floor = (value: number): bigint => BigInt(Math.floor(value));
const isWhole = Number.isInteger;

/** Non-negative numbers in [low, high] (each end exclusive or not). */
function magnitudes(
  low: number,
  lowExclusive: boolean,
  high: number | undefined,
  highExclusive: boolean,
  fractionDigits?: number,
): string[] {
  const options: string[] = [];
  const wholeLow = isWhole(low) ? BigInt(low) + (lowExclusive ? 1n : 0n) : floor(low) + 1n;
  const wholeHigh = high === undefined ? null : isWhole(high) ? BigInt(high) - (highExclusive ? 1n : 0n) : floor(high);
  const whole = naturalRange(wholeLow < 0n ? 0n : wholeLow, wholeHigh);
  if (whole) options.push(whole);
  if (fractionDigits === 0) return options;
  const fraction =
    fractionDigits === undefined
      ? "[0-9]+"
      : ["[0-9]", ...Array.from({ length: fractionDigits - 1 }, () => "[0-9]?")].join(" ");
  // Whole units inside the bounds take any fraction: I ≥ low (above it when exclusive) and I + 1 ≤ high.
  const unitHigh = high === undefined ? null : isWhole(high) ? BigInt(high) - 1n : floor(high) - 1n;
  const units = naturalRange(wholeLow < 0n ? 0n : wholeLow, unitHigh);
  if (units) options.push(`${units} "." ${fraction}`);
  if (fractionDigits === undefined) options.push(...boundaryUnits(low, lowExclusive, high, highExclusive));
  return options;
}

/** The units that hold a bound: their fractions compared with the bound's digit by digit. */
function boundaryUnits(low: number, lowExclusive: boolean, high: number | undefined, highExclusive: boolean): string[] {
  const options: string[] = [];
  const lowFraction = fractionOf(low);
  const highFraction = high === undefined ? undefined : fractionOf(high);
  const lowUnit = floor(low);
  const lowNeedsUnit = (!isWhole(low) || lowExclusive) && lowFraction !== undefined;
  if (lowNeedsUnit) {
    const sameUnit = high !== undefined && !isWhole(high) && floor(high) === lowUnit;
    const fractions = sameUnit
      ? highFraction === undefined
        ? null
        : between(lowFraction, !lowExclusive, highFraction, !highExclusive)
      : high !== undefined && high < Number(lowUnit) + 1
        ? null
        : above(lowFraction, !lowExclusive);
    if (fractions) options.push(`"${lowUnit}" "." ${fractions}`);
  }
  if (high !== undefined && !isWhole(high) && highFraction !== undefined) {
    const highUnit = floor(high);
    const coveredBelow = lowNeedsUnit ? highUnit === lowUnit : false;
    if (!coveredBelow && Number(highUnit) >= low && !(lowExclusive && Number(highUnit) === low)) {
      const fractions = below(highFraction, !highExclusive);
      if (fractions) options.push(`"${highUnit}" "." ${fractions}`);
    }
  }
  return options;
}

/** The grammar of JSON numbers within `bounds`; null when the grammar can write none. */
export function numberRange(bounds: NumberBounds): string | null {
  const { minimum, maximum, fractionDigits } = bounds;
  if (minimum === undefined && maximum === undefined) {
    if (fractionDigits === undefined) return "json_number";
    return fractionDigits === 0
      ? "json_integer"
      : `json_integer ("." ${["[0-9]", ...Array.from({ length: fractionDigits - 1 }, () => "[0-9]?")].join(" ")})?`;
  }
  const options: string[] = [];
  if (maximum === undefined || maximum > 0 || (maximum === 0 && !bounds.maximumExclusive)) {
    const atZero = minimum === undefined || minimum < 0;
    options.push(
      ...magnitudes(
        atZero ? 0 : minimum,
        atZero ? false : bounds.minimumExclusive,
        maximum,
        bounds.maximumExclusive,
        fractionDigits,
      ),
    );
  }
  if (minimum === undefined || minimum < 0) {
    const fromZero = maximum === undefined || maximum >= 0;
    const negative = magnitudes(
      fromZero ? 0 : -maximum,
      fromZero ? true : bounds.maximumExclusive,
      minimum === undefined ? undefined : -minimum,
      bounds.minimumExclusive,
      fractionDigits,
    );
    if (negative.length) options.push(`"-" (${negative.join(" | ")})`);
  }
  if (options.length === 0) return null;
  return options.length === 1 ? options[0]! : `(${options.join(" | ")})`;
}

/**
 * Every multiple of `step` within finite bounds, written out, when there are at most `most` of
 * them (pydantic's `Field(ge=0, le=5, multiple_of=0.5)`): exact, where a range grammar is not.
 * Undefined when the bounds are open or hold too many; null when they hold none.
 */
export function enumeratedMultiples(
  bounds: NumberBounds,
  step: number,
  integer: boolean,
  most = 256,
): string | null | undefined {
  const { minimum, maximum } = bounds;
  if (minimum === undefined || maximum === undefined) return undefined;
  const first = Math.ceil(minimum / step - 1e-9);
  const last = Math.floor(maximum / step + 1e-9);
  if (last - first + 1 > most) return undefined;
  const values: string[] = [];
  for (let index = first; index <= last; index++) {
    const value = Number((index * step).toPrecision(12));
    const inside =
      (bounds.minimumExclusive ? value > minimum : value >= minimum) &&
      (bounds.maximumExclusive ? value < maximum : value <= maximum);
    if (!inside || (integer && !Number.isInteger(value))) continue;
    const text = String(value);
    if (/e/i.test(text)) return undefined;
    values.push(`"${text}"`);
  }
  if (values.length === 0) return null;
  return values.length === 1 ? values[0]! : `(${values.join(" | ")})`;
}

/**
 * Naturals divisible by `step` (a whole number), as the automaton of remainders read digit by
 * digit: one rule per remainder, `name(r)` naming each. Returns the rules' bodies by remainder
 * and the expression that starts it.
 */
export function remainderRules(step: number, name: (remainder: number) => string): { start: string; bodies: string[] } {
  const transitions = (from: number, digits: number[]) => {
    const byTarget = new Map<number, number[]>();
    for (const digit of digits) {
      const target = (from * 10 + digit) % step;
      byTarget.set(target, [...(byTarget.get(target) ?? []), digit]);
    }
    return [...byTarget].map(([target, list]) => `${digitList(list)} ${name(target)}`).join(" | ");
  };
  const all = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9];
  const bodies = Array.from({ length: step }, (_, remainder) => {
    const next = transitions(remainder, all);
    return remainder === 0 ? `(${next})?` : `(${next})`;
  });
  return { start: `("0" | ${transitions(0, all.slice(1))})`, bodies };
}

function digitList(digits: number[]): string {
  if (digits.length === 1) return `"${digits[0]}"`;
  return `[${digits.join("")}]`;
}
