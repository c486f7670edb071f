/**
 * A request's text as an upstream is sent it: the upstream renders its own template and, as
 * llama-server and vLLM do by default, reads a control-token string in message text as the control
 * token. So every string in what it renders (messages, and tool definitions with their keys) is
 * defused first (`Tokenizer.defuse`), and a client's text cannot open or close a turn there either.
 */

/** JSON `value` with `defuse` applied to every string in it, and to every object key where `keys` is set. */
export function defusedJson<Value>(value: Value, defuse: (text: string) => string, keys = false): Value {
  const walk = (node: unknown): unknown => {
    if (typeof node === "string") return defuse(node);
    if (Array.isArray(node)) return node.map(walk);
    if (node === null || typeof node !== "object") return node;
    return Object.fromEntries(Object.entries(node).map(([key, child]) => [keys ? defuse(key) : key, walk(child)]));
  };
  // JSON in, JSON out: the walk keeps each node's shape, and the nesting was bounded when it was read.
  return walk(value) as Value;
}
