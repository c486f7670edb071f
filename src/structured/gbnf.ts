/**
 * Our grammars are written in xgrammar's EBNF (web-llm's). llama.cpp reads GBNF, which is the
 * same notation except that a rule name may hold only letters, digits and `-`: underscores in
 * names become hyphens. String literals and character classes are copied untouched, so what the
 * grammar matches does not change.
 */
export function toGbnf(grammar: string): string {
  let output = "";
  let index = 0;
  while (index < grammar.length) {
    const character = grammar[index]!;
    if (character === '"' || character === "[") {
      const end = closingIndex(grammar, index, character === '"' ? '"' : "]");
      output += grammar.slice(index, end + 1);
      index = end + 1;
      continue;
    }
    if (character === "#") {
      const end = grammar.indexOf("\n", index);
      index = end < 0 ? grammar.length : end;
      continue;
    }
    output += character === "_" ? "-" : character;
    index++;
  }
  return output;
}

/** Where the literal or class opened at `start` closes, skipping backslash escapes. */
function closingIndex(grammar: string, start: number, closing: string): number {
  for (let index = start + 1; index < grammar.length; index++) {
    if (grammar[index] === "\\") index++;
    else if (grammar[index] === closing) return index;
  }
  throw new Error(`unterminated ${closing === '"' ? "string literal" : "character class"} at ${start} in a grammar`);
}
