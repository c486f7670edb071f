/**
 * Pieces of the EBNF our grammars are written in (xgrammar's dialect, which llama.cpp's GBNF
 * reads after `toGbnf`): literals, and the rules for any JSON value.
 */

/** An EBNF string literal matching `text` exactly. */
export function literal(text: string): string {
  let escaped = "";
  for (const character of text) {
    const code = character.codePointAt(0) ?? 0;
    if (character === '"' || character === "\\") escaped += `\\${character}`;
    else if (code < 0x20) escaped += `\\x${code.toString(16).padStart(2, "0")}`;
    else escaped += character;
  }
  return `"${escaped}"`;
}

/** Rules for any JSON value, compact. */
export const jsonRules = [
  'json_value ::= json_object | json_array | json_string | json_number | "true" | "false" | "null"',
  'json_object ::= "{" (json_string ":" json_value ("," json_string ":" json_value)*)? "}"',
  'json_array ::= "[" (json_value ("," json_value)*)? "]"',
  'json_string ::= "\\"" json_character* "\\""',
  'json_character ::= [^"\\\\\\x00-\\x1f] | "\\\\" (["\\\\/bfnrt] | "u" json_hex json_hex json_hex json_hex)',
  "json_hex ::= [0-9a-fA-F]",
  'json_number ::= json_integer ("." [0-9]+)? ([eE] [+-]? [0-9]+)?',
  'json_integer ::= "-"? ("0" | [1-9] [0-9]*)',
];

/** What a grammar needs from its builder: named rules, shared when their bodies are equal. */
export interface RuleSink {
  shared(name: string, body: string): string;
  /** A new rule, under a name no other rule has; `define` may replace its body later (a rule that refers to itself). */
  rule(name: string, body: string): string;
  define(name: string, body: string): void;
  /** Counts the expansion of repetitions, refusing a schema whose grammar would be too large. */
  spend(units: number): void;
}

export function repeatGrammar(item: string, min: number, max: number | null, rules: RuleSink, name: string): string {
  rules.spend(max ?? min + 1);
  const element = /^[A-Za-z_][A-Za-z0-9_]*$|^"[^"]*"$/.test(item) ? item : rules.shared(name, item);
  const required = Array.from({ length: min }, () => element);
  if (max === null) return [...required, `${element}*`].join(" ");
  const optional = upTo(element, max - min, rules, name);
  const parts = [...required, ...(optional ? [optional] : [])];
  return parts.length === 0 ? '""' : parts.join(" ");
}

/**
 * Up to `count` elements. A few are nested in place; more are a chain of rules (`up_to_k ::=
 * element up_to_k-1?`), so no parser recurses through a thousand parentheses.
 */
function upTo(element: string, count: number, rules: RuleSink, name: string): string {
  if (count <= 4) {
    let nested = "";
    for (let left = count; left > 0; left--) nested = `(${element}${nested ? ` ${nested}` : ""})?`;
    return nested;
  }
  let chain = "";
  for (let length = 1; length <= count; length++)
    chain = rules.shared(`${name}_up_to`, chain ? `${element} ${chain}?` : element);
  return `${chain}?`;
}
