/**
 * Control-token strings in text, made text for any tokenizer: a word joiner (U+2060) goes after
 * the first character of every place one starts, so no control-token string is left whole.
 *
 * Linear in the text: each place is matched against a trie of the strings, at most as far as the
 * longest one, and only where the text's character begins one of them.
 */
const joiner = "\u2060";

interface TrieNode {
  next: Map<number, TrieNode>;
  /** Whether a control-token string ends here. */
  ends: boolean;
}

function trieOf(texts: readonly string[]): TrieNode {
  const root: TrieNode = { next: new Map(), ends: false };
  for (const text of texts) {
    // One character cannot be broken inside; no family's control token is one.
    if ([...text].length < 2) continue;
    let node = root;
    for (let index = 0; index < text.length; index++) {
      const code = text.charCodeAt(index);
      let child = node.next.get(code);
      if (!child) node.next.set(code, (child = { next: new Map(), ends: false }));
      node = child;
    }
    node.ends = true;
  }
  return root;
}

const isHighSurrogate = (code: number) => code >= 0xd800 && code <= 0xdbff;

/** Whether a control-token string starts at `start`. */
function startsOne(root: TrieNode, text: string, start: number): boolean {
  let node: TrieNode | undefined = root;
  for (let index = start; node && index < text.length; index++) {
    node = node.next.get(text.charCodeAt(index));
    if (node?.ends) return true;
  }
  return false;
}

/**
 * What defuses `texts` (a tokenizer's control tokens) in a text. Every place one starts gets a
 * joiner, overlapping ones too, so none is whole afterwards; text without any is returned as is.
 */
export function defuser(texts: readonly string[]): (text: string) => string {
  const root = trieOf(texts);
  return (text) => {
    const parts: string[] = [];
    let copied = 0;
    for (let index = 0; index < text.length; index++) {
      if (!root.next.has(text.charCodeAt(index)) || !startsOne(root, text, index)) continue;
      // After the whole first character: a surrogate pair is never split.
      const after = index + (isHighSurrogate(text.charCodeAt(index)) ? 2 : 1);
      parts.push(text.slice(copied, after), joiner);
      copied = after;
    }
    if (copied === 0) return text;
    parts.push(text.slice(copied));
    return parts.join("");
  };
}
