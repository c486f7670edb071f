/**
 * How deep a JSON text nests, read before it is parsed. Whatever JSON we take in (a client's body,
 * an upstream's reply or event) is serialised again or walked by code that recurses, and
 * JSON.stringify overflows the stack near 5,000 levels: far deeper text is refused as it arrives,
 * and tool-call arguments or results nested deeper are written into prompts as text, not as JSON.
 */

/**
 * The deepest nesting taken. A schema at its 32-level limit is about 70 levels of JSON, and no
 * completion nests beyond a few.
 */
export const maxNesting = 256;

/** Whether `text` nests its arrays and objects deeper than `maxNesting`: each character read once, strings skipped. */
export function nestsTooDeep(text: string): boolean {
  let depth = 0;
  let inString = false;
  for (let index = 0; index < text.length; index++) {
    const character = text.charCodeAt(index);
    if (inString) {
      if (character === 0x5c)
        index++; // a backslash: the next character is escaped
      else if (character === 0x22) inString = false;
    } else if (character === 0x22) inString = true;
    else if (character === 0x5b || character === 0x7b) {
      if (++depth > maxNesting) return true;
    } else if (character === 0x5d || character === 0x7d) depth--;
  }
  return false;
}
