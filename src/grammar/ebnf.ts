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
