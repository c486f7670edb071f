/**
 * A small recognizer for the EBNF our grammars are written in (xgrammar's dialect, as far as we
 * use it: literals with \" \\ \xHH escapes, character classes, rule references, grouping,
 * alternation, and * + ?). Tests use it to check what a generated grammar accepts.
 */
type Node =
  | { type: "literal"; text: string }
  | { type: "class"; negate: boolean; ranges: [number, number][] }
  | { type: "reference"; name: string }
  | { type: "sequence"; items: Node[] }
  | { type: "choice"; options: Node[] }
  | { type: "repeat"; item: Node; min: number; max: number };

function unescape(source: string, start: number): [number, number] {
  const next = source[start + 1];
  if (next === "x") return [parseInt(source.slice(start + 2, start + 4), 16), start + 4];
  const simple: Record<string, number> = { n: 10, t: 9, r: 13 };
  return [simple[next ?? ""] ?? next!.codePointAt(0)!, start + 2];
}

class Parser {
  position = 0;
  constructor(readonly source: string) {}
  skip() {
    while (/\s/.test(this.source[this.position] ?? "")) this.position++;
  }
  choice(): Node {
    const options = [this.sequence()];
    for (this.skip(); this.source[this.position] === "|"; this.skip()) {
      this.position++;
      options.push(this.sequence());
    }
    return options.length === 1 ? options[0]! : { type: "choice", options };
  }
  sequence(): Node {
    const items: Node[] = [];
    for (this.skip(); this.position < this.source.length && !"|)".includes(this.source[this.position]!); this.skip())
      items.push(this.postfix());
    return items.length === 1 ? items[0]! : { type: "sequence", items };
  }
  postfix(): Node {
    let node = this.atom();
    for (;;) {
      const character = this.source[this.position];
      if (character === "*") node = { type: "repeat", item: node, min: 0, max: Infinity };
      else if (character === "+") node = { type: "repeat", item: node, min: 1, max: Infinity };
      else if (character === "?") node = { type: "repeat", item: node, min: 0, max: 1 };
      else return node;
      this.position++;
    }
  }
  atom(): Node {
    const character = this.source[this.position];
    if (character === "(") {
      this.position++;
      const inner = this.choice();
      this.skip();
      if (this.source[this.position++] !== ")") throw new Error(`expected ) at ${this.position}`);
      return inner;
    }
    if (character === '"') {
      let text = "";
      this.position++;
      while (this.source[this.position] !== '"') {
        if (this.position >= this.source.length) throw new Error("unterminated literal");
        if (this.source[this.position] === "\\") {
          const [code, next] = unescape(this.source, this.position);
          text += String.fromCodePoint(code);
          this.position = next;
        } else text += this.source[this.position++];
      }
      this.position++;
      return { type: "literal", text };
    }
    if (character === "[") {
      this.position++;
      const negate = this.source[this.position] === "^";
      if (negate) this.position++;
      const ranges: [number, number][] = [];
      const read = (): number => {
        if (this.source[this.position] === "\\") {
          const [code, next] = unescape(this.source, this.position);
          this.position = next;
          return code;
        }
        const code = this.source.codePointAt(this.position)!;
        this.position += String.fromCodePoint(code).length;
        return code;
      };
      while (this.source[this.position] !== "]") {
        const low = read();
        if (this.source[this.position] === "-" && this.source[this.position + 1] !== "]") {
          this.position++;
          ranges.push([low, read()]);
        } else ranges.push([low, low]);
      }
      this.position++;
      return { type: "class", negate, ranges };
    }
    const name = /^[A-Za-z_][A-Za-z0-9_]*/.exec(this.source.slice(this.position));
    if (!name) throw new Error(`unexpected ${JSON.stringify(character)} at ${this.position}`);
    this.position += name[0].length;
    return { type: "reference", name: name[0] };
  }
}

export function parseGrammar(grammar: string): Map<string, Node> {
  const rules = new Map<string, Node>();
  for (const line of grammar.split("\n")) {
    if (!line.trim()) continue;
    const at = line.indexOf(" ::= ");
    if (at < 0) throw new Error(`not a rule: ${line}`);
    const parser = new Parser(line.slice(at + 5));
    const node = parser.choice();
    parser.skip();
    if (parser.position !== parser.source.length)
      throw new Error(`trailing input in rule ${line.slice(0, at)}: ${parser.source.slice(parser.position)}`);
    rules.set(line.slice(0, at).trim(), node);
  }
  for (const node of rules.values()) checkReferences(node, rules);
  return rules;
}

function checkReferences(node: Node, rules: Map<string, Node>): void {
  if (node.type === "reference" && !rules.has(node.name)) throw new Error(`undefined rule ${node.name}`);
  if (node.type === "sequence") node.items.forEach((item) => checkReferences(item, rules));
  if (node.type === "choice") node.options.forEach((option) => checkReferences(option, rules));
  if (node.type === "repeat") checkReferences(node.item, rules);
}

/** Whether `grammar` (from its `root`) accepts exactly `input`. */
export function accepts(grammar: string, input: string): boolean {
  const rules = parseGrammar(grammar);
  const memo = new Map<string, Set<number>>();
  const ends = (node: Node, position: number): Set<number> => {
    switch (node.type) {
      case "literal":
        return input.startsWith(node.text, position) ? new Set([position + node.text.length]) : new Set();
      case "class": {
        const code = input.codePointAt(position);
        if (code === undefined) return new Set();
        const inside = node.ranges.some(([low, high]) => code >= low && code <= high);
        return inside !== node.negate ? new Set([position + String.fromCodePoint(code).length]) : new Set();
      }
      case "reference": {
        const key = `${node.name}@${position}`;
        const known = memo.get(key);
        if (known) return known;
        memo.set(key, new Set());
        const result = ends(rules.get(node.name)!, position);
        memo.set(key, result);
        return result;
      }
      case "sequence":
        return node.items.reduce(
          (positions, item) => new Set([...positions].flatMap((start) => [...ends(item, start)])),
          new Set([position]),
        );
      case "choice":
        return new Set(node.options.flatMap((option) => [...ends(option, position)]));
      case "repeat": {
        const result = new Set<number>();
        let frontier = new Set([position]);
        for (let count = 0; frontier.size > 0; count++) {
          if (count >= node.min) frontier.forEach((end) => result.add(end));
          if (count >= node.max) break;
          const next = new Set<number>();
          for (const start of frontier)
            for (const end of ends(node.item, start)) if (end > start && !result.has(end)) next.add(end);
          frontier = next;
        }
        return result;
      }
    }
  };
  return ends({ type: "reference", name: "root" }, 0).has(input.length);
}
